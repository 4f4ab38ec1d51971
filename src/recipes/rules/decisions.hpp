// What the state machines without I/O (fair_acquire, room_wait,
// race_acquire) and the engine's coroutines share: the one rule of which
// failures an acquire rides through, short names for error codes, and which
// node a user's own recipe may hold.
#pragma once

#include <cstdint>
#include <optional>
#include <system_error>
#include <zkasio/error.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/operations.hpp>

namespace zkasio::detail {

// Whether an acquire rides through the failure `ec`: the connection lost or
// the server busy (retryable) while the session is still the one its node
// was made in (`made_in`, the session's generation `now`), so its node is
// still in the queue: it waits for the connection and asks again, within
// its deadline. A try (`one_look`) does not.
inline bool rides_through(error_code ec, bool one_look, std::uint64_t now, std::uint64_t made_in) {
  return !one_look && ec == condition::retryable && now == made_in;
}

// Whether an acquire whose attempt failed with `ec` queues again: after an
// expiry, with requeue_on_expiry, not a try, when a session follows the one
// its node was made in (`made_in`): not `closed`, and not `expired` in that
// generation (a session that will reconnect counts its next generation,
// `now`, before it says expired: session_impl.cpp).
// A request cut off (retryable) in a later session than the node's counts
// as the expiry it is: the C client fails what was in flight with
// connection_loss when the session it was sent in expired.
inline bool queues_again(error_code ec, bool requeue_on_expiry, bool one_look, std::uint64_t made_in,
                         std::uint64_t now, bool expired, bool closed) {
  bool session_follows = !closed && (now != made_in || !expired);
  bool session_went = ec == zk_error::session_expired || (ec == condition::retryable && now != made_in);
  return session_went && requeue_on_expiry && !one_look && session_follows;
}

inline error_code code(zk_error e) { return make_error_code(e); }
inline error_code code(error e) { return make_error_code(e); }

// Why the node a user's own recipe made may not be held (async_hold_node),
// if it may not: its `stat` as found (nullopt: no such node) must be an
// EPHEMERAL node's of the session `session_id`, which alone deletes it.
inline error_code own_node_refusal(const std::optional<node_stat>& stat, std::int64_t session_id) {
  if (!stat) return code(zk_error::no_node);
  if (stat->ephemeral_owner == 0 || stat->ephemeral_owner != session_id) return code(error::not_own_node);
  return {};
}

}  // namespace zkasio::detail
