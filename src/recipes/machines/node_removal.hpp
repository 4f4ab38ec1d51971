// The removal of a node the engine made, as a state machine without I/O:
// resume(event, look) -> action. Its runner (remove_node, engine_nodes.cpp)
// carries the actions out and decides nothing.
//
// Three removals, one rule: never another session's node, and never a
// delete sent in a session other than the one the node was made in.
// - a named node (a fair queue's, a semaphore's lease, a user's held node):
//   deleted, retried after connection losses while its session lives;
// - the race recipes' node (the path itself, which every holder creates in
//   turn): looked up first, and deleted only while it is still this
//   session's and, when its czxid is known, the same incarnation (only an
//   operator's delete and another session's create between that look and
//   the delete, in one session, escape it: ZooKeeper's delete checks a
//   version, not an owner, and the version does not tell incarnations
//   apart);
// - a race attempt's node whose create's outcome is unknown (the attempt
//   failed or was stopped): connected, synced, looked up; deleted as above
//   if this session owns it (with the session's turn, such a node is the
//   attempt's), nothing to do if not.
// What a removal answers:
// - success: deleted (or a retry found it gone: the first delete took
//   effect; or, found first, there was none);
// - lock_lost: gone already (deleted by another: an operator, a revocation),
//   or gone with its session (expired, closed, or a later session now);
// - another error the server gave (no auth, a bad path...).
// `forget` in the answer: the node is known not to be there any more (the
// process's view of nodes, known_nodes, drops it). A session closed while
// disconnected keeps its nodes until the server expires it: not forgotten.
//
// Not stopped from outside: a removal goes on until it ends, which its
// session's end ensures (no answer waits longer than the session). The
// session's end is an input, seen in each look and in each answer
// (session_expired, session_closed, or a request refused by its pin).
//
// Unit-tested by scripted events, and each script replayed with a fault at
// every step (tests/unit/test_node_removal.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <system_error>
#include <variant>
#include <zkasio/operations.hpp>

namespace zkasio::detail {

class node_removal {
 public:
  // The node, as the engine knows it.
  struct target {
    std::int64_t owner = 0;         // its ephemeral owner: the session that made it
    std::uint64_t generation = 0;   // that session's generation (session_impl)
    std::int64_t czxid = 0;         // the incarnation, if known (0: any of its owner's)
    bool race = false;              // the path itself: whose it is, looked up before the delete
    bool find_first = false;        // a race node whose create's outcome is unknown: found first
  };
  // The world as it stands when an event is fed in.
  struct look {
    std::uint64_t generation = 0;  // the session's now
    std::int64_t session_id = 0;   // its id; 0 until its handshake
  };

  // ------------------------------------------------------------------ events
  struct connected { error_code ec; };  // the wait for the connection (and a pause) ended
  struct synced { error_code ec; };
  struct looked_up { error_code ec; std::optional<node_stat> stat{}; };  // exists of the node
  struct removed { error_code ec; };    // the delete's answer
  using event = std::variant<connected, synced, looked_up, removed>;

  // ----------------------------------------------------------------- actions
  // Wait until it may ask again: connected, and after a busy server's answer
  // (`after`) a pause first (busy_backoff.hpp).
  struct connect { error_code after; };
  struct sync {};     // a sync of the lock's path (a reconnection may be to another server)
  struct look_up {};  // exists of the node
  // Delete the node by name, pinned to the target's generation
  // (session::pinned: refused with session_expired once it has ended).
  struct remove {};
  struct done { error_code ec; bool forget = false; };
  using action = std::variant<connect, sync, look_up, remove, done>;

  explicit node_removal(target t) : target_(t) {}

  action start(const look& now);
  // The next action, given what came back of the last one. An event that
  // is not the one the last action waits for is a broken promise of the
  // runner's: done(internal_error).
  action resume(const event& e, const look& now);
  bool finished() const noexcept { return stage_ == stage::finished; }
  // The session the node was made in: the delete's pin.
  std::uint64_t generation() const noexcept { return target_.generation; }

 private:
  enum class stage {
    find_connect,  // a race node maybe made: connected,
    find_sync,     //   synced,
    find_look,     //   and looked up: whose
    own_look,      // the race node, before its delete: still this session's incarnation?
    removing,      // the delete's answer
    connecting,    // cut off: connected again, then asked again
    finished,
  };

  action find(error_code after);
  // The answer `ec` read in a session after the node's, or its expiry: done.
  std::optional<action> went_with_session(error_code ec, const look& now);
  action on_synced(error_code ec, const look& now);
  action on_found(const looked_up& l, const look& now);
  // From the session check: the race node looked up, a named node deleted.
  action attempt(const look& now);
  action on_own(const looked_up& l, const look& now);
  // A look or a delete answered `ec` (the delete may not have been sent).
  action after(error_code ec);
  action on_connected(error_code ec, const look& now);
  action finish(error_code ec, bool forget = false);

  target target_;
  stage stage_ = stage::finished;
  bool unanswered_delete_ = false;  // a delete was sent and its answer lost: it may have taken effect
};

}  // namespace zkasio::detail
