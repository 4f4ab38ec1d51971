// fair_acquire: one acquire of a fair queue (mutex, shared_mutex, election's
// fair mode, and the creation of a semaphore's lease nodes), as a state
// machine without I/O: resume(event) -> action. The runner
// (acquire_runner.hpp) carries each action out on the session and feeds
// what comes back in as the next event; unit tests feed scripted events
// (tests/unit/test_fair_acquire.cpp), every interleaving the server, the
// connection, a timer or the caller can make, without a server.
//
// What it decides, in the order an acquire meets it:
// - connected first (a try while no server is connected: not_connected);
// - create its node and list the queue in one round trip; a create whose
//   reply was lost is found by its uuid (after a sync, in a listing, then
//   its owner checked) and never taken from another session; no parent:
//   the parents are made (at most 3 times: a container may go again);
// - the queue's rule (decide, queue_rule.hpp) says: held, wait for a
//   predecessor (in this process when it is a node of the same session,
//   else with a watch), or missing (lock_lost);
// - a predecessor gone: the known nodes below are walked (known_nodes), or
//   the queue is listed again;
// - before a grant: its own node still there (after a wait, or for an
//   election's candidate), a downgrade's write node and its own read node
//   listed after a sync, its session not ended since the attempt began,
//   and replies recent enough to be sure of the session (else the
//   session's contact confirmed since, and another look);
// - a failure the acquire rides through (the connection lost, the server
//   busy, in the same session): wait for the connection (a pause after a
//   busy answer) and list again; a try (one look) does not.
// What it leaves to its runner: deadlines and cancellation (abort), the
// removal of its node once it failed, requeueing after an expiry.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "recipes/rules/lock_queue.hpp"
#include "recipes/rules/queue_rule.hpp"
#include <zkasio/operations.hpp>

namespace zkasio::detail {

// What the state machine asks of the world it decides in, at the moment it
// decides: the session (its generation, id, whether its replies are recent
// enough to grant on) and this process's knowledge of the lock's nodes
// (known_nodes). The runner answers from the real ones; tests from a script.
class acquire_world {
 public:
  virtual ~acquire_world() = default;
  virtual std::uint64_t generation() const = 0;
  virtual std::int64_t session_id() const = 0;
  virtual bool connected() const = 0;
  // Counts the session's connections (session_core::connections): a watch
  // is trusted to tell of changes in their order within one connection only.
  virtual std::uint64_t connection() const = 0;
  // Whether no server is connected now but one may come (connecting,
  // disconnected, a new session after an expiry).
  virtual bool awaiting_server() const = 0;
  // Whether a grant may be made now (session_sure); why none ever can, if so.
  virtual bool sure() const = 0;
  virtual error_code never_sure() const = 0;
  // known_nodes: whether `name` is a node of the acquire's session (of
  // `generation`), what is below `mine`, a node known gone, a node of ours.
  virtual bool here(std::string_view name, std::uint64_t generation) const = 0;
  // What is below `mine` (known_nodes::below): a node to wait for, or
  // `name` that may be gone (relist), or nothing.
  struct below_result {
    enum { first, node, relist } what = first;
    std::string name{};
  };
  virtual below_result below(const lock_node& mine, std::string_view exempt) = 0;
  virtual void gone(std::string_view name) = 0;
  virtual void add(const lock_node& node, std::uint64_t generation, std::string_view beside) = 0;
  // A listing's part up to `end` as a view made with what is known now.
  virtual std::shared_ptr<const queue_view> view(std::vector<lock_node> prefix) const = 0;
};

class fair_acquire {
 public:
  // What the acquire is: filled in by its maker, read by the runner.
  struct contender {
    node_kind kind = node_kind::lock;
    uuid_text uuid{};
    // A downgrade (a write holder's read lock): the node takes the write
    // node's sequence and is not blocked by it.
    std::optional<std::string> downgrade_of{};
    // Granted only once its node is seen owned by this session (an
    // election: Curator's CURATOR-696).
    bool confirm_owner = false;
    bool one_look = false;  // a try: lock_busy, and no riding through
    // Only create the node and list the queue (a semaphore's lease): done
    // once the node is known, whatever the queue says.
    bool create_only = false;
  };

  // ------------------------------------------------------------------ events
  struct connected { error_code ec; };  // the wait for the connection (and a pause) ended
  // The create's reply and the listing sent after it, which the session
  // answers in that order. `replied` false: the listing failed before the
  // create was answered (the order broken, or refused at once).
  struct created_and_listed {
    bool replied = true;
    error_code create_ec{};
    lock_node node{};  // named by the reply (also when create_ec is unexpected_reply)
    node_stat stat{};
    error_code list_ec{};
    std::shared_ptr<const queue_view> view{};
  };
  struct listed { error_code ec; std::shared_ptr<const queue_view> view; };
  struct synced { error_code ec; };
  struct confirmed { error_code ec; };  // the session's contact confirmed since it was asked
  struct looked_up { error_code ec; std::optional<node_stat> stat; };  // an exists' reply
  struct parents_made { error_code ec; };
  struct gone { error_code ec; };  // the node waited for went (or the wait failed)
  // The watch on its own node (wait_gone's watch_own): the exists sent after
  // that watch's request answered, and the node's deletion. Taken in any
  // stage: out of the wait they change nothing.
  struct own_checked { error_code ec; std::optional<node_stat> stat; };
  struct own_gone { error_code ec; };
  using event = std::variant<connected, created_and_listed, listed, synced, confirmed, looked_up, parents_made,
                             gone, own_checked, own_gone>;

  // ----------------------------------------------------------------- actions
  // Wait until it may ask again: connected, and after a busy server's answer
  // (`after`: throttled_op, session_moved) a pause first.
  struct connect { error_code after; };
  // Send the create, then a listing shared with the lock object's other
  // contenders (the create's reply names the node to the known nodes before
  // the listing's reply is read); deliver both as created_and_listed.
  struct create_and_list {};
  struct list {};
  struct sync {};
  // Wait until the leader is known to have seen the session since now
  // (session::async_confirm_contact).
  struct confirm {};
  struct look_up { std::string name; };  // exists
  struct make_parents {};
  // Wait for `name` to go: in this process (`here`), else by a watch. With
  // `watch_own`, also watch its own node and then send an exists of it
  // (own_checked; own_gone if it goes). A session is told of its own node's
  // deletion before any change after it (within one connection), so with
  // that watch set and the node there when the exists was answered, the
  // grant that follows the predecessor's going in that connection needs no
  // request. (Only while waiting behind a node
  // of another session: a session's server watches do not grow with the
  // waiters it has in this process.)
  struct wait_gone {
    std::string name;
    bool here = false;
    bool watch_own = false;
  };
  struct keep_waiting {};  // nothing more to do: what is pending stands
  struct grant {};
  struct fail { error_code ec; };
  using action = std::variant<connect, create_and_list, list, sync, confirm, look_up, make_parents, wait_gone,
                              keep_waiting, grant, fail>;

  explicit fair_acquire(contender c) : c_(std::move(c)) {}

  // The first action.
  action start(acquire_world& world);
  // The next action, given what came back of the last one. An event that is
  // not the one the last action waits for is a broken promise of the
  // runner's: fail(internal_error).
  action resume(event e, acquire_world& world);

  // Ends it where it stands (a deadline, a cancellation): later events are
  // its runner's to drop.
  void abort() noexcept { stage_ = stage::finished; }

  const contender& who() const noexcept { return c_; }
  // What is known of its node: set by the create's reply (or found by uuid).
  const lock_node& node() const noexcept { return node_; }
  lock_node take_node() noexcept { return std::move(node_); }  // (its runner's, once it is over)
  const std::string& predecessor() const noexcept { return predecessor_; }  // the node waited for
  const node_stat& stat() const noexcept { return stat_; }
  std::uint64_t generation() const noexcept { return generation_; }
  bool submitted() const noexcept { return submitted_; }  // a create may have taken effect
  bool node_gone() const noexcept { return gone_; }       // its node is known to be gone
  bool finished() const noexcept { return stage_ == stage::finished; }
  // The node a downgrade does not wait for (its owner's write node).
  std::string_view exempt() const noexcept {
    return c_.downgrade_of ? std::string_view(*c_.downgrade_of) : std::string_view();
  }

 private:
  enum class stage {
    connecting,        // until connected, then create
    creating,          // the create's reply and the listing's
    parents,           // the parents being made
    parents_retry,     // connected again after the parents' making was cut off
    finding_connect,   // a lost create reply: connected again,
    finding_sync,      //   then a sync,
    finding_list,      //   a listing,
    finding_look,      //   the node by its uuid, its owner
    relist_connect,    // cut off (or told to look again): connected again,
    relisting,         //   then a listing
    waiting,           // for the predecessor to go
    verifying,         // its own node still there, before a grant
    downgrade_sync,    // a downgrade's nodes: a sync,
    downgrade_look,    //   then a listing that shows both still there
    sure_confirm,      // the session confirmed before a grant decided on old replies
    finished,
  };

  action create(acquire_world& world);
  action on_created(created_and_listed&& e, acquire_world& world);
  action decide_on(error_code ec, std::shared_ptr<const queue_view> view, acquire_world& world);
  action wait_for(std::string predecessor, acquire_world& world);
  action on_gone(error_code ec, acquire_world& world);
  action on_own(const event& e, acquire_world& world);
  action relist(error_code after);
  action check(bool verify, acquire_world& world);
  action after_verify(acquire_world& world);
  action after_downgrade(acquire_world& world);
  action find(error_code after);
  action on_found(const looked_up& e, acquire_world& world);
  action finish(action a);
  action failed(error_code ec) { return finish(fail{ec}); }
  // The session it began in has ended (its node, if made, went with it):
  // session_expired, if so.
  std::optional<action> ended_with_session(const acquire_world& world);
  // A failure it rides through: the connection lost or the server busy, in
  // its own session (a try does not).
  bool rides_through(error_code ec, const acquire_world& world) const;

  contender c_;
  stage stage_ = stage::connecting;
  std::uint64_t generation_ = 0;
  bool submitted_ = false;
  bool gone_ = false;
  lock_node node_{};
  node_stat stat_{};
  int parents_made_ = 0;
  // After a lost create reply: the listing that showed a node with its
  // uuid, and where, while its owner is looked up.
  std::shared_ptr<const queue_view> found_in_{};
  std::size_t found_at_ = 0;
  std::string predecessor_{};
  bool relist_after_ = false;
  // The known node a walk down met and could not tell gone (its session not
  // connected, or its object destroyed): the listing that follows, which
  // shows every node before mine, tells (gone if it does not show it).
  std::string unsure_below_{};
  bool predecessor_here_ = false;
  // The watch on its own node: none, asked (its exists not answered yet),
  // or sure (set, and the node was there after it).
  enum class own_watch : std::uint8_t { none, asked, sure } own_ = own_watch::none;
  std::uint64_t own_connection_ = 0;  // the connection its own node's watch was asked in
};

}  // namespace zkasio::detail
