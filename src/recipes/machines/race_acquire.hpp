// The race recipes' acquire (race_mutex, election's race mode: one EPHEMERAL
// node at the path, created by whoever is first), as a state machine
// without I/O: resume(event, look) -> action.
//
// What it decides, in the order an acquire meets it:
// - connected first (a try while no server is connected: not_connected);
// - this session's turn at the path (local_turns.hpp; a try: busy when it
//   is another's), then the session's id (0 until its handshake): with the
//   turn, a node this session owns at the path is this attempt's;
// - create the node; made, and the session sure (session_sure): granted;
// - the node there already: once, whose it is (a node of this session is
//   nobody's: deleted, and created again; a persistent one would be waited
//   for in vain: node_exists); another's: watch its deletion and race again
//   (a try: busy);
// - no parent: the parents are made (at most 3 times: a container may go
//   again);
// - a create that may have taken effect (its reply lost): the node looked up
//   (after a sync); owned by this session: granted; not there: created
//   again; made, but answered too late to be sure of the session: looked up
//   again once the session's contact is confirmed since;
// - a failure it rides through (the connection lost, the server busy, in
//   the same session; a try does not): wait for the connection and go on;
//   a later session: session_expired.
// The runner (race_run.hpp) carries the actions out; the deadline, the
// caller's cancellation and the removal of a node made by a failed attempt
// are its and acquire_flow's, as for a fair queue's attempts. Unit-tested by scripted events in tests/unit/test_race_acquire.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <system_error>
#include <variant>
#include <zkasio/operations.hpp>

namespace zkasio::detail {

class race_acquire {
 public:
  // The world as it stands when an event is fed in.
  struct look {
    std::uint64_t generation = 0;  // the session's now
    std::int64_t session_id = 0;   // its id; 0 until its handshake
    bool connected = true;
    bool awaiting_server = false;  // not connected, but a server may come
    bool sure = true;              // session_sure: recent replies may grant
    error_code never_sure{};  // why no grant can ever be sure, if so
  };

  // ------------------------------------------------------------------ events
  struct connected { error_code ec; };                   // the wait for the connection (and a pause) ended
  struct turn_taken { error_code ec; bool taken = true; };  // the session's turn at the path
  struct created { error_code ec; node_stat stat{}; };
  struct looked_up { error_code ec; std::optional<node_stat> stat{}; };  // the node at the path
  struct synced { error_code ec; };
  struct confirmed { error_code ec; };     // the session's contact confirmed since it was asked
  struct removed { error_code ec; };       // a node of this session deleted (delete_node's answer)
  struct gone { error_code ec; };          // the node watched was deleted (or the watch failed)
  struct parents_made { error_code ec; };  // make_parents' answer
  using event = std::variant<connected, turn_taken, created, looked_up, synced, confirmed, removed, gone, parents_made>;

  // ----------------------------------------------------------------- actions
  // Wait until it may ask again: connected, and after a busy server's answer
  // (`after`: throttled_op, session_moved) a pause first.
  struct connect { error_code after; };
  // The session's turn: waited for, or (a try) taken only if free.
  struct take_turn { bool wait = true; };
  struct create {};   // the EPHEMERAL node at the path
  struct look_up {};  // exists of the path
  struct sync {};
  // Wait until the leader is known to have seen the session since now
  // (session::async_confirm_contact).
  struct confirm {};
  // Delete the node of this session at the path, the incarnation `czxid`
  // (delete_node, which retries while the session lives).
  struct remove_own { std::int64_t owner = 0; std::int64_t czxid = 0; };
  struct watch {};         // until the node at the path is deleted
  struct make_parents {};  // the path's parents, as containers
  struct granted { node_stat stat; };
  struct fail { error_code ec; };
  using action =
      std::variant<connect, take_turn, create, look_up, sync, confirm, remove_own, watch, make_parents, granted, fail>;

  // `one_look`: a try (busy at once, no riding through).
  explicit race_acquire(bool one_look) : one_look_(one_look) {}

  action start(const look& now);
  // The next action, given what came back of the last one. An event that
  // is not the one the last action waits for is a broken promise of the
  // runner's: fail(internal_error).
  action resume(const event& e, const look& now);
  // Stopped by its runner (the deadline, the caller's cancellation).
  void abort() noexcept { stage_ = stage::finished; }
  bool finished() const noexcept { return stage_ == stage::finished; }

  // The session it races in (set once connected) and that session's id (set
  // before its first create): the runner's cleanup reads them.
  std::uint64_t generation() const noexcept { return generation_; }
  std::int64_t session_id() const noexcept { return session_id_; }

 private:
  enum class stage {
    connecting,     // until connected, then the turn
    turn,           // the session's turn
    identifying,    // connected until the session has its id
    creating,       // the create's reply
    own_look,       // the node found there: whose
    own_connect,    //   cut off meanwhile: connected again, then create
    own_removing,   //   this session's: deleted, then create
    watching,       // another's: until deleted,
    watch_connect,  //   or, cut off, connected again; then create
    parents,        // the parents being made
    find_connect,   // a create maybe made: connected again,
    find_sync,      //   then a sync,
    find_look,      //   then the node at the path, its owner
    confirming,     // made, on replies too old to be sure of the session: confirmed, then found
    finished,
  };

  action take_session_turn(const look& now);
  action on_turn(const turn_taken& t, const look& now);
  action identify(const look& now);
  action create_node(const look& now);
  action on_created(const created& c, const look& now);
  action on_own(const looked_up& l, const look& now);
  action on_gone(error_code ec, const look& now);
  action others_node();
  action find(error_code after);
  action on_found(const looked_up& l, const look& now);
  // Made, but the replies too old to be sure of the session: once it is
  // confirmed, looked up again.
  action confirm_session(const look& now);
  action on_connected(error_code ec, const look& now);
  action finish(action a);
  action failed(error_code ec) { return finish(fail{ec}); }
  // The session it began in has ended (its node, if made, went with it):
  // session_expired, if so.
  std::optional<action> ended_with_session(const look& now);
  // A failure it rides through: the connection lost or the server busy, in
  // its own session (a try does not).
  bool rides_through(error_code ec, const look& now) const;

  bool one_look_;
  stage stage_ = stage::connecting;
  std::uint64_t generation_ = 0;
  std::int64_t session_id_ = 0;
  // Whose the node found at the path is was asked: once is enough, while
  // the attempt has the turn this session makes no other.
  bool checked_own_ = false;
  int parents_made_ = 0;
};

}  // namespace zkasio::detail
