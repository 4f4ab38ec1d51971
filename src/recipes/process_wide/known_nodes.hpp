// known_nodes: this process's knowledge of the lock nodes its own mutexes
// created under one lock path on one ensemble.
//
// Scope and lifetime: one object per (connect string, lock path) in the
// process, shared by every mutex on that path whatever its session (a
// process-wide table of weak references: the object lives while a mutex on
// the path does).
//
// What it knows, and the rules that keep it true:
// - An entry is added when a create's reply names the node (or the node was
//   found by its uuid after a lost reply), with the session it belongs to.
//   Nodes are told apart by sequence and name: one sequence is one node, but
//   for a downgrade's read node, which takes the sequence of its owner's
//   write node (so it is the one node that can appear below a contender after
//   that contender's listing: it is known before it exists, see lock_engine).
// - An entry is removed only when its node is known to be gone: its owner
//   deleted it (or found it gone), a watcher saw it deleted, or its session
//   has expired (every ephemeral node of it is gone), or a contender's
//   listing, which shows every node of its queue made before its own (it was
//   answered after its own node was made), does not show it. So "not here"
//   is only ever believed of a node that is gone; an entry may still be a
//   node that is gone without this process knowing yet (an operator deleted
//   it). A session object destroyed proves nothing (closed while
//   disconnected, its nodes live until the server expires it): a walk that
//   meets its entry lists again (below: relist), and the listing tells.
// - Every way an acquire or a hold ends removes its entry (after its node's
//   deletion, or once its session is over), but a session closed while
//   disconnected, whose entries stay until a listing or a watch shows the
//   nodes gone.
// - When a session ends (expires, or is closed), every mutex on it says so
//   (session_ended): the local waits on its nodes end at once, whatever their
//   owners do; an expired session's entries go (its nodes are gone), a closed
//   one's stay until their owners end them (closed while disconnected, its
//   nodes live until the server expires it).
//
// What it is for:
// - A contender whose listing shows only known nodes below its predecessor
//   need not list again once the predecessor goes: it walks down the known
//   nodes (below()), skipping those of sessions that are over without a
//   round trip, and lists again only when a node of a session that is not
//   connected may be below (such a session may be over without knowing it).
// - A contender whose predecessor is a node of its own session (same session,
//   same generation) waits for it here (wait_gone), with no watch on the
//   server: that node's end is always seen in this process (its owner
//   deletes it or finds it gone; a holder's monitor watches its node until
//   it is released, also after the lock may be lost; or the session ends,
//   which ends the waiter too). So a session's server watches do not grow
//   with its waiters.
//
// Thread-safe: mutexes on other strands and threads share it (one std::mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "recipes/rules/lock_queue.hpp"
#include "recipes/rules/queue_rule.hpp"
#include <zkasio/detail/session_core.hpp>

namespace zkasio::detail {

// The ZooKeeper session a node belongs to: a zkasio session and its
// generation when the node was created.
struct session_ref {
  std::weak_ptr<const session_core> core;
  std::uint64_t generation = 0;

  bool same_as(const session_ref& other) const;
  // True once that ZooKeeper session is known to have expired: its nodes are
  // all gone. (A closed one's may live on: closed while disconnected, until
  // it expires; so may those of one whose authentication failed, and those
  // of a session whose object was destroyed: nothing tells.)
  bool nodes_gone() const;
  // Connected in that generation: its nodes are gone only if deleted.
  bool connected() const;
  // Expired, closed, or its authentication failed: no waiter of it goes on.
  bool ended() const;
};

class known_nodes {
 public:
  // The object for `path` on the ensemble `hosts`.
  static std::shared_ptr<known_nodes> of(const std::string& hosts, const std::string& path);

  // `beside`: the write node whose sequence a downgrade's read node shares.
  void add(const lock_node& node, session_ref owner, std::string_view beside = {});
  // The node is gone; its local waiters are woken.
  void gone(std::string_view name);
  // The session `owner` ended (expired: `nodes_gone`, or closed): the local
  // waits on its nodes end.
  void session_ended(const session_ref& owner, bool nodes_gone);

  // A listing as a queue, with the nodes this process does not know counted.
  queue_view view(std::vector<lock_node> queue) const;

  // The nearest known node below `mine` that may still be there and blocks
  // it (its recipe's rule, queue_rule.hpp; not `exempt`), for a walk down the queue
  // (entries of sessions that are over are dropped on the way).
  struct below_result {
    // relist: `name`, of a session not connected (or whose object is gone),
    // is below: it may be gone without this process knowing.
    enum { first, node, relist } what = first;
    std::string name{};
    session_ref owner{};
  };
  below_result below(const lock_node& mine, std::string_view exempt = {});

  // Whether `name` is known as a node of the session `owner`.
  bool owned_by(std::string_view name, const session_ref& owner) const;

  // A wait here for a known node's end: told once, from whichever thread
  // learnt it (the waiter takes the news to its own strand), with the token
  // it gave, so that it can tell an earlier wait's news from the current's.
  // An entry of a few bytes per waiter: a session's thousands of waiters
  // wait here.
  struct gone_waiter {
    virtual ~gone_waiter() = default;
    virtual void node_gone(std::uint32_t token) = 0;
  };
  // Tells `waiter` once the node `name` is gone (from this call if it is not
  // known). The wait holds its waiter until then (or until withdrawn): a
  // waiting acquire is owned by nothing else.
  void wait_gone(std::string_view name, std::shared_ptr<gone_waiter> waiter, std::uint32_t token);
  // Withdraws `waiter`'s wait on `name` (it stopped waiting): nothing is told.
  void forget_wait(std::string_view name, const gone_waiter* waiter);

  // Entries, and waits here on them, for tests.
  std::size_t size() const;
  std::size_t waits() const;

 private:
  struct local_waiter {
    std::shared_ptr<gone_waiter> waiter;
    std::uint32_t token = 0;
  };
  struct entry {
    node_kind kind;
    session_ref owner;
    std::vector<local_waiter> waiters;
  };
  // By sequence, then name: a downgrade's read node shares its write node's
  // sequence.
  using key = std::pair<sequence_number, std::string>;
  // Looked up by a name's view too (lookup_key): no copy of the name.
  using lookup_key = std::pair<sequence_number, std::string_view>;
  struct key_less {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::tie(a.first, a.second) < std::tie(b.first, b.second);
    }
  };
  using entries = std::map<key, entry, key_less>;

  // With guard_ held: the entry of `name`, or end().
  entries::iterator find(std::string_view name);
  // With guard_ held: removes `it`, handing its waiters to `woken`.
  void erase(entries::iterator it, std::vector<local_waiter>& woken);
  static void wake(std::vector<local_waiter>& woken);

  mutable std::mutex guard_;
  entries entries_;
};

}  // namespace zkasio::detail
