// The error mapping: every ZooKeeper code converts by value into the
// "zookeeper" category with a message of its own; zkasio's own errors are in
// the "zkasio" category; both belong to the right condition.
#include <doctest/doctest.h>
#include <zookeeper/zookeeper.h>

#include <set>
#include <utility>
#include <zkasio/error.hpp>
#include <zkasio/error_code.hpp>

using zkasio::condition;
using zkasio::error;
using zkasio::zk_error;

TEST_CASE("every ZooKeeper error code has a zk_error with the same value and a message") {
  const int codes[] = {ZSYSTEMERROR, ZRUNTIMEINCONSISTENCY, ZDATAINCONSISTENCY, ZCONNECTIONLOSS,
                       ZMARSHALLINGERROR, ZUNIMPLEMENTED, ZOPERATIONTIMEOUT, ZBADARGUMENTS,
                       ZINVALIDSTATE, ZNEWCONFIGNOQUORUM, ZRECONFIGINPROGRESS, ZSSLCONNECTIONERROR,
                       ZAPIERROR, ZNONODE, ZNOAUTH, ZBADVERSION, ZNOCHILDRENFOREPHEMERALS,
                       ZNODEEXISTS, ZNOTEMPTY, ZSESSIONEXPIRED, ZINVALIDCALLBACK, ZINVALIDACL,
                       ZAUTHFAILED, ZCLOSING, ZNOTHING, ZSESSIONMOVED, ZNOTREADONLY,
                       ZEPHEMERALONLOCALSESSION, ZNOWATCHER, ZRECONFIGDISABLED,
                       ZSESSIONCLOSEDREQUIRESASLAUTH, ZTHROTTLEDOP};
  std::set<std::string> messages;
  for (int code : codes) {
    std::error_code ec = static_cast<zk_error>(code);
    CAPTURE(code);
    CHECK(ec.category().name() == std::string("zookeeper"));
    CHECK(ec.message().find("unknown") == std::string::npos);
    messages.insert(ec.message());
  }
  CHECK(messages.size() == std::size(codes));  // no two codes share a message
  CHECK(std::error_code(zk_error::no_node).message() == "node does not exist (for a create: its parent does not exist)");
  // What a wrong digest password looks like in ZooKeeper: not a failed login, another identity.
  CHECK(std::error_code(zk_error::no_auth).message().find("wrong digest password") != std::string::npos);
  CHECK(std::error_code(static_cast<zk_error>(-999)).message() == "unknown zookeeper error -999");
}

TEST_CASE("zkasio's own errors have a category of their own, apart from ZooKeeper's codes") {
  const error own[] = {error::invalid_path,        error::request_too_large, error::session_closed,
                       error::lock_lost,           error::not_held,          error::lock_busy,
                       error::lock_timeout,        error::would_deadlock,    error::invalid_lease_count,
                       error::not_fenced,          error::invalid_safety_margin, error::unexpected_reply,
                       error::internal_error,      error::not_connected,     error::unresolvable_host,
                       error::not_zookeeper,       error::not_own_node,      error::invalid_policy};
  std::set<std::string> messages;
  for (auto e : own) {
    std::error_code ec = e;
    CAPTURE(ec.value());
    CHECK(ec.category().name() == std::string("zkasio"));
    CHECK(ec.category() != zkasio::zookeeper_category());
    CHECK(ec.message().find("unknown") == std::string::npos);
    messages.insert(ec.message());
  }
  CHECK(messages.size() == std::size(own));
  // Equal values in the two categories are different errors.
  CHECK(std::error_code(error::invalid_path) != std::error_code(static_cast<zk_error>(1)));
  CHECK(std::error_code(static_cast<error>(999)).message() == "unknown zkasio error 999");
}

TEST_CASE("error conditions group errors by what the caller should do") {
  CHECK(std::error_code(zk_error::connection_loss) == condition::retryable);
  CHECK(std::error_code(zk_error::operation_timeout) == condition::retryable);
  CHECK(std::error_code(zk_error::session_expired) == condition::session_gone);
  CHECK(std::error_code(zk_error::auth_failed) == condition::session_gone);
  CHECK(std::error_code(error::session_closed) == condition::session_gone);
  CHECK(std::error_code(error::invalid_path) == condition::caller_fault);
  CHECK(std::error_code(zk_error::bad_arguments) == condition::caller_fault);
  CHECK(std::error_code(error::request_too_large) == condition::caller_fault);
  CHECK(std::error_code(error::not_own_node) == condition::caller_fault);
  CHECK(std::error_code(zk_error::no_node) != condition::retryable);
  CHECK(std::error_code(zk_error::no_node) != condition::caller_fault);
  CHECK(std::error_code(error::internal_error) != condition::retryable);
  CHECK(std::error_code(error::lock_lost) != condition::session_gone);
  // A session that can never connect is over; unreachable is not busy.
  CHECK(std::error_code(error::unresolvable_host) == condition::session_gone);
  CHECK(std::error_code(error::not_zookeeper) == condition::session_gone);
  CHECK(std::error_code(error::not_connected) != std::error_code(error::lock_timeout));
  CHECK(std::error_code(error::not_connected) != condition::retryable);
  CHECK(std::error_code(zk_error::connection_loss) != condition::session_gone);
  CHECK(std::error_condition(condition::retryable).message().find("retryable") == 0);
}

TEST_CASE("conditions of what happened: busy, timed out, lost, not held, not connected, unreachable") {
  const std::pair<std::error_code, condition> member[] = {
      {error::lock_busy, condition::busy},
      {zk_error::throttled_op, condition::busy},
      {error::lock_timeout, condition::timed_out},
      {zk_error::operation_timeout, condition::timed_out},
      {error::lock_lost, condition::lost},
      {error::not_held, condition::not_held},
      {error::not_connected, condition::not_connected},
      {zk_error::connection_loss, condition::not_connected},
      {error::unresolvable_host, condition::unreachable},
      {error::not_zookeeper, condition::unreachable},
      {zk_error::ssl_connection_error, condition::unreachable},
  };
  const condition events[] = {condition::busy,     condition::timed_out,     condition::lost,
                              condition::not_held, condition::not_connected, condition::unreachable};
  for (auto& [code, in] : member) {
    CAPTURE(code.message());
    CHECK(code == in);
    for (auto other : events)
      if (other != in) CHECK(code != other);
  }
  // Beside the default condition: a lost connection is retryable and not connected.
  CHECK(std::error_code(zk_error::connection_loss) == condition::retryable);
  CHECK(std::error_code(error::unresolvable_host) == condition::session_gone);
  // Codes no condition of what happened holds.
  for (std::error_code none : {std::error_code(zk_error::no_node), std::error_code(error::session_closed),
                               std::error_code(zk_error::session_expired), std::error_code(error::invalid_path)}) {
    CAPTURE(none.message());
    for (auto c : events) CHECK(none != c);
  }
  // The portable codes that mean the same, as an Asio timer or socket gives them.
  CHECK(std::make_error_code(std::errc::timed_out) == condition::timed_out);
  CHECK(std::make_error_code(std::errc::device_or_resource_busy) == condition::busy);
  CHECK(std::make_error_code(std::errc::resource_unavailable_try_again) == condition::busy);
  CHECK(std::make_error_code(std::errc::not_connected) == condition::not_connected);
  CHECK(std::make_error_code(std::errc::connection_refused) == condition::unreachable);
  CHECK(std::make_error_code(std::errc::timed_out) != condition::busy);
  CHECK(std::make_error_code(std::errc::timed_out) != condition::retryable);
  CHECK(std::error_condition(condition::unreachable).message() == "no ZooKeeper server reachable");
}

TEST_CASE("codes compare equal to the portable code (std::errc) that means the same, and to no other") {
  const std::pair<std::error_code, std::errc> same[] = {
      {error::lock_timeout, std::errc::timed_out},
      {error::lock_busy, std::errc::device_or_resource_busy},
      {error::not_held, std::errc::operation_not_permitted},
      {error::not_own_node, std::errc::operation_not_permitted},
      {error::would_deadlock, std::errc::resource_deadlock_would_occur},
      {error::not_connected, std::errc::not_connected},
      {error::request_too_large, std::errc::message_size},
      {error::invalid_path, std::errc::invalid_argument},
      {error::invalid_lease_count, std::errc::invalid_argument},
      {error::invalid_safety_margin, std::errc::invalid_argument},
      {error::invalid_policy, std::errc::invalid_argument},
      {zk_error::no_node, std::errc::no_such_file_or_directory},
      {zk_error::node_exists, std::errc::file_exists},
      {zk_error::not_empty, std::errc::directory_not_empty},
      {zk_error::no_auth, std::errc::permission_denied},
      {zk_error::operation_timeout, std::errc::timed_out},
      {zk_error::bad_arguments, std::errc::invalid_argument},
  };
  for (auto& [code, errc] : same) {
    CAPTURE(code.message());
    CHECK(code == errc);
    for (auto& [other_code, other] : same)
      if (other != errc) CHECK(code != other);
  }
  // The conditions still hold beside them.
  CHECK(std::error_code(zk_error::operation_timeout) == condition::retryable);
  CHECK(std::error_code(error::invalid_path) == condition::caller_fault);
  CHECK(std::error_code(zk_error::connection_loss) != std::errc::timed_out);
  CHECK(std::error_code(error::internal_error) != std::errc::invalid_argument);
}

// What every operation completes with is zkasio::error_code: Boost's over
// Boost.Asio (scripts/test's boost stage runs this tier), which must compare
// with the codes, the conditions and std::errc as a std::error_code does.
TEST_CASE("zkasio::error_code compares with zkasio's codes, conditions and std::errc as std::error_code does") {
  const zkasio::error_code timed_out = make_error_code(error::lock_timeout);
  CHECK(timed_out == error::lock_timeout);
  CHECK(timed_out != error::lock_busy);
  CHECK(timed_out == condition::timed_out);
  CHECK(timed_out != condition::busy);
  CHECK(timed_out == std::errc::timed_out);
  CHECK(timed_out != std::errc::device_or_resource_busy);
  const zkasio::error_code cut_off = make_error_code(zk_error::connection_loss);
  CHECK(cut_off == zk_error::connection_loss);
  CHECK(cut_off == condition::retryable);
  CHECK(cut_off == condition::not_connected);
  CHECK(cut_off != condition::session_gone);
  // Back to a std::error_code: the same code, and the same message.
  CHECK(std::error_code(timed_out) == error::lock_timeout);
  CHECK(timed_out.message() == std::error_code(error::lock_timeout).message());
  CHECK_FALSE(zkasio::error_code());
}
