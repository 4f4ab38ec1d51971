// What a holder's monitor decides (engine_hold.cpp's hold_monitor carries it
// out): whether a hold may still be held, and if not why, from what its
// session and its node tell. Without I/O, so that each way a lock is lost is
// unit-tested by scripted looks (tests/unit/test_hold_watch.cpp), one for
// each of the README's guarantees on the holder's side: the session expired
// or closed, the servers silent past the session's sure time, a
// disconnection under each policy, an operator's delete, a revocation.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>
#include <zkasio/lock.hpp>
#include <zkasio/operations.hpp>
#include <zkasio/session_options.hpp>

namespace zkasio::detail {

// Why a holder may no longer hold.
enum class loss {
  none,            // not lost (the monitor was stopped: released)
  node_gone,       // the node was deleted: known gone
  session_over,    // the session expired (or its authentication failed): its nodes are gone
  session_closed,  // closed by its owner: its nodes go at once, or (closed while
                   // disconnected) when the server expires it
  may_be_lost,     // revoked, or the policy's deadline: the node may still be there
};
// What a request's failure `ec` says of a hold.
loss loss_of(error_code ec);

// The session's side. First (`deadlines`), until the lock may be lost: the
// session's end, a disconnection under on_suspend, and sure_until (the
// server cannot expire the session before its last sight of it plus the
// timeout: a safety margin before that, connected or not, since a follower
// that lost its leader goes on answering for a while). Then, the lock
// possibly lost but its node maybe still there: the session's end only.
// Under on_expiry (a presence node's, async_hold_node), the session's end
// only, from the start.
class session_watch {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  session_watch(std::uint64_t generation, bool deadlines, lost_policy policy)
      : generation_(generation), deadlines_(deadlines), policy_(policy) {}

  struct look {
    std::uint64_t generation = 0;  // the session's now
    session_state state = session_state::connected;
    time_point now{};
    time_point sure_until{};  // last_contact + negotiated timeout - safety margin
  };
  // A loss, or none yet: then look again at the next change of state, or at
  // `look_again` if that comes first.
  struct verdict {
    loss why = loss::none;
    time_point look_again = time_point::max();
  };
  verdict judge(const look& now) const;

 private:
  std::uint64_t generation_;  // the hold's session's
  bool deadlines_;
  lost_policy policy_;
};

// The node's side: the watch on the holder's node fired with `ec` and
// `event`: the loss that means, or nullopt: read the node (its data changed:
// revoked?).
std::optional<loss> after_node_event(error_code ec, event_type event);
// That read answered `ec`; the node read is the hold's incarnation or not,
// and carries the revocation request or not: the loss that means, or
// nullopt: watch it again from the version read.
std::optional<loss> after_node_read(error_code ec, bool same_incarnation, bool revoked);

}  // namespace zkasio::detail
