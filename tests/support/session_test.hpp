// What the session tests share: unique node names, session options, and the
// error of an awaited operation.
#pragma once

#include <unistd.h>

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <zkasio/error_code.hpp>
#include <zkasio/session_options.hpp>

namespace zkasio::test {

// A path no other test (or test process) uses.
inline std::string unique_path(const std::string& name) {
  static std::atomic<int> counter{0};
  return "/" + name + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

// The servers the tests start tick every 200 ms (zk_servers' server_options);
// servers named by ZKASIO_TEST_HOSTS tick as they were configured, which the
// library then takes to be ZooKeeper's default (session_options::server_tick_time).
inline session_options test_options(const std::string& hosts,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(4)) {
  session_options o;
  o.hosts = hosts;
  o.session_timeout = timeout;
  if (!std::getenv("ZKASIO_TEST_HOSTS")) o.server_tick_time = std::chrono::milliseconds(200);
  return o;
}

// The error an operation completes with: error_of([&](auto t) { return s.async_x(..., t); }).
template <class Op>
asio::awaitable<zkasio::error_code> error_of(Op op) {
  zkasio::error_code ec;
  co_await op(asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

}  // namespace zkasio::test
