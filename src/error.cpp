#include <zkasio/error.hpp>

namespace zkasio {
namespace {

const char* describe(error e) noexcept {
  switch (e) {
    case error::system_error: return "ZooKeeper system error";
    case error::runtime_inconsistency: return "ZooKeeper runtime inconsistency";
    case error::data_inconsistency: return "ZooKeeper data inconsistency";
    case error::connection_loss: return "connection to the ZooKeeper server lost";
    case error::marshalling_error: return "error while marshalling or unmarshalling data";
    case error::unimplemented: return "operation not implemented by the server";
    case error::operation_timeout: return "ZooKeeper operation timed out";
    case error::bad_arguments: return "invalid arguments";
    case error::invalid_state: return "ZooKeeper handle in an invalid state";
    case error::new_config_no_quorum: return "no quorum of the new configuration is connected";
    case error::reconfig_in_progress: return "another reconfiguration is in progress";
    case error::ssl_connection_error: return "SSL connection error";
    case error::api_error: return "ZooKeeper API error";
    case error::no_node: return "node does not exist (for a create: its parent does not exist)";
    case error::no_auth:
      return "not authorized by the node's ACL (a wrong digest password is no error in ZooKeeper: it is "
             "another identity, which the ACL does not admit)";
    case error::bad_version: return "version conflict";
    case error::no_children_for_ephemerals: return "ephemeral nodes may not have children";
    case error::node_exists: return "node already exists";
    case error::not_empty: return "node has children";
    case error::session_expired: return "session expired";
    case error::invalid_callback: return "invalid callback";
    case error::invalid_acl: return "invalid ACL";
    case error::auth_failed: return "authentication failed";
    case error::closing: return "ZooKeeper handle is closing";
    case error::nothing: return "no server responses to process";
    case error::session_moved: return "session moved to another server";
    case error::not_read_only: return "write request sent to a read-only server";
    case error::ephemeral_on_local_session: return "ephemeral node on a local session";
    case error::no_watcher: return "no such watcher";
    case error::reconfig_disabled: return "reconfiguration is disabled";
    case error::session_closed_requires_sasl_auth: return "session closed: the server requires SASL authentication";
    case error::throttled_op: return "operation throttled by the server";
    case error::invalid_path: return "invalid ZooKeeper path";
    case error::request_too_large: return "request larger than the server accepts (jute.maxbuffer)";
    case error::session_closed: return "session closed";
    case error::lock_lost: return "the lock was lost";
    case error::not_held: return "the lock is not held";
    case error::lock_busy: return "the lock is held by another contender";
    case error::lock_timeout: return "the lock was not granted before the deadline";
    case error::would_deadlock:
      return "a holder of the read lock cannot take the write lock: it would wait for itself (release the read lock first)";
    case error::invalid_lease_count: return "a semaphore's acquire needs from 1 to its maximum number of leases";
    case error::not_fenced:
      return "a race recipe's lock cannot guard writes: ZooKeeper cannot tell its node from a later holder's "
             "(use zkasio::mutex)";
    case error::invalid_safety_margin:
      return "the lock's safety_margin is not below its session's negotiated timeout: every lock would be lost "
             "as it is granted (make it smaller, or the session timeout longer)";
  }
  return nullptr;
}

class error_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "zkasio"; }

  std::string message(int value) const override {
    const char* text = describe(static_cast<error>(value));
    return text ? text : "unknown zkasio error " + std::to_string(value);
  }

  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<error>(value)) {
      case error::connection_loss:
      case error::operation_timeout:
      case error::throttled_op:
      case error::session_moved:
        return condition::retryable;
      case error::session_expired:
      case error::auth_failed:
      case error::closing:
      case error::invalid_state:
      case error::session_closed_requires_sasl_auth:
      case error::session_closed:
        return condition::session_gone;
      case error::bad_arguments:
      case error::invalid_acl:
      case error::invalid_path:
      case error::request_too_large:
      case error::no_children_for_ephemerals:
      case error::invalid_callback:
      case error::would_deadlock:
      case error::invalid_lease_count:
      case error::not_fenced:
      case error::invalid_safety_margin:
        return condition::caller_fault;
      default:
        return {value, *this};
    }
  }
};

class condition_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "zkasio.condition"; }

  std::string message(int value) const override {
    switch (static_cast<condition>(value)) {
      case condition::retryable: return "retryable: the connection was lost or the server was busy";
      case condition::session_gone: return "the session is gone";
      case condition::caller_fault: return "the request was invalid";
    }
    return "unknown zkasio condition " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const error_category_impl instance;
  return instance;
}

const std::error_category& condition_category() noexcept {
  static const condition_category_impl instance;
  return instance;
}

}  // namespace zkasio
