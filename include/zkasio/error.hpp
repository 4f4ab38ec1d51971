// Error codes: ZooKeeper's (zk_error, category "zookeeper"), each mirrored
// with its own value; the library's own (error, category "zkasio"); and the
// conditions that group both by what a caller should do about them.
#pragma once

#include <string>
#include <system_error>

namespace zkasio {

// ZooKeeper's codes (enum ZOO_ERRORS), with their values, so that a code
// from the C client converts by value: what the server answered, or what the
// C client says went wrong on its side.
enum class zk_error : int {
  // ZooKeeper system errors
  system_error = -1,
  runtime_inconsistency = -2,
  data_inconsistency = -3,
  connection_loss = -4,
  marshalling_error = -5,
  unimplemented = -6,
  operation_timeout = -7,
  bad_arguments = -8,
  invalid_state = -9,
  new_config_no_quorum = -13,
  reconfig_in_progress = -14,
  ssl_connection_error = -15,
  // ZooKeeper API errors
  api_error = -100,
  no_node = -101,
  no_auth = -102,
  bad_version = -103,
  no_children_for_ephemerals = -108,
  node_exists = -110,
  not_empty = -111,
  session_expired = -112,
  invalid_callback = -113,
  invalid_acl = -114,
  auth_failed = -115,
  closing = -116,
  nothing = -117,
  session_moved = -118,
  not_read_only = -119,
  ephemeral_on_local_session = -120,
  no_watcher = -121,
  reconfig_disabled = -123,
  session_closed_requires_sasl_auth = -124,
  throttled_op = -127,
};

// What zkasio itself reports.
enum class error : int {
  invalid_path = 1,      // a path that ZooKeeper would reject; checked before sending
  request_too_large,     // over the server's jute.maxbuffer; checked before sending
  session_closed,        // the session was closed by its owner
  lock_lost,             // the lock node was gone when its holder looked
  not_held,              // release or revoke of a lock that is not held
  lock_busy,             // try_acquire: another contender holds the lock
  lock_timeout,          // acquire_for / acquire_until: the deadline passed first
  would_deadlock,        // a read holder asked for the write lock: it would wait for itself
  invalid_lease_count,   // a semaphore asked for no lease, or for more than it has
  not_fenced,            // guarded writes under a race recipe's lock, which nothing on the server fences
  invalid_safety_margin, // a lock's safety_margin not below its session's negotiated timeout less a tick
  unexpected_reply,      // the server answered as no ZooKeeper server does (a node name the recipe did not make)
  internal_error,        // zkasio failed inside (an exception, or a broken invariant): a bug, or out of memory
  not_connected,         // an acquire's deadline passed, or a try looked, while no ZooKeeper server was connected
  unresolvable_host,     // no host of the connect string resolved (session::failure() names them): the session ended
  not_zookeeper,         // a server answered the handshake as no ZooKeeper server does (session::failure() names
                         // it): the session ended
  not_own_node,          // async_hold_node: the node is not an EPHEMERAL node of this session (persistent, or another's)
  invalid_policy,        // lost_policy::on_expiry given to a lock recipe: it would hold past the moment it may be lost
};

const std::error_category& zookeeper_category() noexcept;
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(zk_error e) noexcept {
  return {static_cast<int>(e), zookeeper_category()};
}
inline std::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// Conditions: what a caller should do about an error (the first three: a
// code belongs to one at most, its default condition), and what happened to
// a lock or a connection (the others: a code may belong to one of each).
// The second group matches the portable code that means the same too:
// `ec == condition::timed_out` holds for std::errc::timed_out (an Asio
// timer's or socket's), and lock_timeout compares equal to both.
enum class condition : int {
  retryable = 1,  // the connection was lost or the server was busy: the request may be retried
  session_gone,   // the session is over (expired, authentication failed, closed)
  caller_fault,   // the request itself was wrong: retrying cannot help
  busy,           // held by another, or the server throttled the request: lock_busy, throttled_op
  timed_out,      // a deadline passed first: lock_timeout, operation_timeout
  lost,           // a held lock may be lost: lock_lost (a waiter's session_expired is session_gone)
  not_held,       // what was to be released is not held: not_held
  not_connected,  // no server was connected: not_connected, connection_loss
  unreachable,    // no server of the connect string can be talked to: unresolvable_host, not_zookeeper,
                  // ssl_connection_error
};

const std::error_category& condition_category() noexcept;

inline std::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), condition_category()};
}

}  // namespace zkasio

template <>
struct std::is_error_code_enum<zkasio::zk_error> : std::true_type {};
template <>
struct std::is_error_code_enum<zkasio::error> : std::true_type {};
template <>
struct std::is_error_condition_enum<zkasio::condition> : std::true_type {};
