// What the session tests share: unique node names, session options, the
// error of an awaited operation, and a server behind a proxy.
#pragma once

#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <zkasio/error_code.hpp>
#include <zkasio/session.hpp>
#include <zkasio/session_options.hpp>

#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

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

// A private server with a proxy in front of it (clients given
// proxy.address() can be cut off, stalled or fed lost replies) and an
// io_context: what the tests of faults share.
struct proxied_server {
  zk_servers servers;
  tcp_proxy proxy{servers.host(1)};
  asio::io_context io;
};

// With a session through the proxy, on a timeout short enough to expire
// it (1 s), and an observer's session straight to the server.
struct proxied_session : proxied_server {
  session s{io, test_options(proxy.address(), std::chrono::seconds(1))};
  session observer{io, test_options(servers.hosts(), std::chrono::seconds(10))};
};

}  // namespace zkasio::test
