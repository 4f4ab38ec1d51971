// What the session tests share: unique node names, session options, and the
// error of an awaited operation.
#pragma once

#include <unistd.h>

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <string>
#include <zkasio/error_code.hpp>
#include <zkasio/session_options.hpp>

namespace zkasio::test {

// A path no other test (or test process) uses.
inline std::string unique_path(const std::string& name) {
  static std::atomic<int> counter{0};
  return "/" + name + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

inline session_options test_options(const std::string& hosts,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(4)) {
  session_options o;
  o.hosts = hosts;
  o.session_timeout = timeout;
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
