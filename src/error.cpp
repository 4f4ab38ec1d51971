#include <zkasio/error.hpp>

#include <optional>

namespace zkasio {
namespace {

const char* describe(zk_error e) noexcept {
  switch (e) {
    case zk_error::system_error: return "ZooKeeper system error";
    case zk_error::runtime_inconsistency: return "ZooKeeper runtime inconsistency";
    case zk_error::data_inconsistency: return "ZooKeeper data inconsistency";
    case zk_error::connection_loss: return "connection to the ZooKeeper server lost";
    case zk_error::marshalling_error: return "error while marshalling or unmarshalling data";
    case zk_error::unimplemented: return "operation not implemented by the server";
    case zk_error::operation_timeout: return "ZooKeeper operation timed out";
    case zk_error::bad_arguments: return "invalid arguments";
    case zk_error::invalid_state: return "ZooKeeper handle in an invalid state";
    case zk_error::new_config_no_quorum: return "no quorum of the new configuration is connected";
    case zk_error::reconfig_in_progress: return "another reconfiguration is in progress";
    case zk_error::ssl_connection_error: return "SSL connection error";
    case zk_error::api_error: return "ZooKeeper API error";
    case zk_error::no_node: return "node does not exist (for a create: its parent does not exist)";
    case zk_error::no_auth:
      return "not authorized by the node's ACL (a wrong digest password is no error in ZooKeeper: it is "
             "another identity, which the ACL does not admit)";
    case zk_error::bad_version: return "version conflict";
    case zk_error::no_children_for_ephemerals: return "ephemeral nodes may not have children";
    case zk_error::node_exists: return "node already exists";
    case zk_error::not_empty: return "node has children";
    case zk_error::session_expired: return "session expired";
    case zk_error::invalid_callback: return "invalid callback";
    case zk_error::invalid_acl: return "invalid ACL";
    case zk_error::auth_failed: return "authentication failed";
    case zk_error::closing: return "ZooKeeper handle is closing";
    case zk_error::nothing: return "no server responses to process";
    case zk_error::session_moved: return "session moved to another server";
    case zk_error::not_read_only: return "write request sent to a read-only server";
    case zk_error::ephemeral_on_local_session: return "ephemeral node on a local session";
    case zk_error::no_watcher: return "no such watcher";
    case zk_error::reconfig_disabled: return "reconfiguration is disabled";
    case zk_error::session_closed_requires_sasl_auth: return "session closed: the server requires SASL authentication";
    case zk_error::throttled_op: return "operation throttled by the server";
  }
  return nullptr;
}

const char* describe(error e) noexcept {
  switch (e) {
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
      return "the lock's safety_margin is not below its session's negotiated timeout less the servers' tick "
             "(session_options::server_tick_time): every lock would be lost as it is granted (make it smaller, "
             "or the session timeout longer)";
    case error::invalid_policy:
      return "lost_policy::on_expiry is for a node held with async_hold_node: a lock recipe would hold past the "
             "moment its lock may be lost (use before_expiry or on_suspend)";
    case error::unexpected_reply: return "the server answered as no ZooKeeper server does";
    case error::internal_error: return "zkasio failed inside (an exception, or a broken invariant)";
    case error::not_connected:
      return "no ZooKeeper server was connected (at the deadline, or when a try looked): unreachable, not busy";
    case error::unresolvable_host: return "no host of the connect string could be resolved";
    case error::not_zookeeper: return "a server of the connect string answered as no ZooKeeper server does";
    case error::not_own_node:
      return "only an EPHEMERAL node of this session can be held (this one is persistent, or another session's)";
  }
  return nullptr;
}

// The condition of a code of either category: what the caller should do.
std::error_condition condition_of(zk_error e) noexcept {
  switch (e) {
    case zk_error::connection_loss:
    case zk_error::operation_timeout:
    case zk_error::throttled_op:
    case zk_error::session_moved:
      return condition::retryable;
    case zk_error::session_expired:
    case zk_error::auth_failed:
    case zk_error::closing:
    case zk_error::invalid_state:
    case zk_error::session_closed_requires_sasl_auth:
      return condition::session_gone;
    case zk_error::bad_arguments:
    case zk_error::invalid_acl:
    case zk_error::no_children_for_ephemerals:
    case zk_error::invalid_callback:
      return condition::caller_fault;
    default:
      return {};
  }
}

std::error_condition condition_of(error e) noexcept {
  switch (e) {
    case error::session_closed:
    case error::unresolvable_host:
    case error::not_zookeeper:
      return condition::session_gone;
    case error::invalid_path:
    case error::request_too_large:
    case error::would_deadlock:
    case error::invalid_lease_count:
    case error::not_fenced:
    case error::invalid_safety_margin:
    case error::invalid_policy:
    case error::not_own_node:
      return condition::caller_fault;
    default:
      return {};
  }
}

// The conditions of what happened (beside the default one, above).
std::optional<condition> event_of(zk_error e) noexcept {
  switch (e) {
    case zk_error::throttled_op: return condition::busy;
    case zk_error::operation_timeout: return condition::timed_out;
    case zk_error::connection_loss: return condition::not_connected;
    case zk_error::ssl_connection_error: return condition::unreachable;
    default: return std::nullopt;
  }
}

std::optional<condition> event_of(error e) noexcept {
  switch (e) {
    case error::lock_busy: return condition::busy;
    case error::lock_timeout: return condition::timed_out;
    case error::lock_lost: return condition::lost;
    case error::not_held: return condition::not_held;
    case error::not_connected: return condition::not_connected;
    case error::unresolvable_host:
    case error::not_zookeeper:
      return condition::unreachable;
    default: return std::nullopt;
  }
}

// The portable code (std::errc) a code compares equal to, where one means
// the same: what a program written against std::mutex or POSIX checks for
// (`ec == std::errc::timed_out`).
std::optional<std::errc> generic_of(zk_error e) noexcept {
  switch (e) {
    case zk_error::no_node: return std::errc::no_such_file_or_directory;
    case zk_error::node_exists: return std::errc::file_exists;
    case zk_error::not_empty: return std::errc::directory_not_empty;
    case zk_error::no_auth: return std::errc::permission_denied;
    case zk_error::operation_timeout: return std::errc::timed_out;
    case zk_error::bad_arguments: return std::errc::invalid_argument;
    default: return std::nullopt;
  }
}

std::optional<std::errc> generic_of(error e) noexcept {
  switch (e) {
    case error::lock_timeout: return std::errc::timed_out;
    case error::lock_busy: return std::errc::device_or_resource_busy;  // pthread_mutex_trylock's EBUSY
    case error::not_held: return std::errc::operation_not_permitted;   // pthread_mutex_unlock's EPERM
    case error::not_own_node: return std::errc::operation_not_permitted;
    case error::would_deadlock: return std::errc::resource_deadlock_would_occur;
    case error::not_connected: return std::errc::not_connected;
    case error::request_too_large: return std::errc::message_size;
    case error::invalid_path:
    case error::invalid_lease_count:
    case error::invalid_safety_margin:
    case error::invalid_policy:
      return std::errc::invalid_argument;
    default: return std::nullopt;
  }
}

template <class Code>
class code_category final : public std::error_category {
 public:
  explicit code_category(const char* name) : name_(name) {}
  const char* name() const noexcept override { return name_; }

  std::string message(int value) const override {
    const char* text = describe(static_cast<Code>(value));
    return text ? text : "unknown " + std::string(name_) + " error " + std::to_string(value);
  }

  std::error_condition default_error_condition(int value) const noexcept override {
    auto c = condition_of(static_cast<Code>(value));
    return c ? c : std::error_condition(value, *this);
  }

  // Its conditions (above), and its portable code (generic_of).
  bool equivalent(int value, const std::error_condition& other) const noexcept override {
    if (default_error_condition(value) == other) return true;
    if (auto event = event_of(static_cast<Code>(value)); event && other == make_error_condition(*event)) return true;
    auto generic = generic_of(static_cast<Code>(value));
    return generic && other == std::make_error_condition(*generic);
  }

 private:
  const char* name_;
};

class condition_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "zkasio.condition"; }

  std::string message(int value) const override {
    switch (static_cast<condition>(value)) {
      case condition::retryable: return "retryable: the connection was lost or the server was busy";
      case condition::session_gone: return "the session is gone";
      case condition::caller_fault: return "the request was invalid";
      case condition::busy: return "busy: held by another, or throttled";
      case condition::timed_out: return "timed out";
      case condition::lost: return "the lock may be lost";
      case condition::not_held: return "not held";
      case condition::not_connected: return "no ZooKeeper server connected";
      case condition::unreachable: return "no ZooKeeper server reachable";
    }
    return "unknown zkasio condition " + std::to_string(value);
  }

  // Codes of other categories that mean the same: a timer's or a socket's.
  bool equivalent(const std::error_code& code, int value) const noexcept override {
    if (code.category() == *this) return code.value() == value;
    switch (static_cast<condition>(value)) {
      case condition::busy:
        return code == std::errc::device_or_resource_busy || code == std::errc::resource_unavailable_try_again;
      case condition::timed_out: return code == std::errc::timed_out;
      case condition::not_connected: return code == std::errc::not_connected;
      case condition::unreachable:
        return code == std::errc::host_unreachable || code == std::errc::network_unreachable ||
               code == std::errc::connection_refused;
      default: return false;
    }
  }
};

}  // namespace

const std::error_category& zookeeper_category() noexcept {
  static const code_category<zk_error> instance("zookeeper");
  return instance;
}

const std::error_category& error_category() noexcept {
  static const code_category<error> instance("zkasio");
  return instance;
}

const std::error_category& condition_category() noexcept {
  static const condition_category_impl instance;
  return instance;
}

}  // namespace zkasio
