// What every zkasio benchmark does: open sessions on a fresh io_context, run
// its coroutine on the one thread to the end; an exception ends the program
// (a benchmark that failed has nothing to report).
#pragma once

#include <unistd.h>

#include <asio/awaitable.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zkasio/session.hpp>

#include "latency.hpp"

namespace zkasio::bench {

inline void run_to_end(asio::io_context& io, asio::awaitable<void> work, const char* subcommand) {
  asio::co_spawn(io, std::move(work), [subcommand](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::cerr << "zkasio-bench " << subcommand << ": " << x.what() << '\n';
      std::_Exit(1);
    }
  });
  io.run();
}

using session_list = std::vector<std::unique_ptr<session>>;

// Untimed rounds first: caches, allocators and the server's paths warm up.
constexpr int warm_up_rounds = 20;

// Runs measure(sessions, o, report) with `count` sessions; returns the report.
template <class Measure>
report run_with_sessions(const options& o, int count, const char* subcommand, Measure measure) {
  asio::io_context io(1);
  session_list opened;
  // Long enough that a thread busy queuing a hundred thousand waiters never
  // lets its session lapse.
  for (int i = 0; i < count; ++i)
    opened.push_back(std::make_unique<session>(
        io, session_options{.hosts = o.hosts, .session_timeout = std::chrono::seconds(30)}));
  report r;
  run_to_end(io, measure(opened, o, r), subcommand);
  return r;
}

// A directory of the server's own for one run of `subcommand`.
inline std::string bench_dir(const char* subcommand) {
  return "/zkasio-bench-" + std::string(subcommand) + "-" + std::to_string(getpid());
}

// The lock's parents are containers; removing them at once leaves the server
// as it was without waiting for its container reaper.
inline asio::awaitable<void> remove_dir(session& s, std::string dir, std::vector<std::string> locks) {
  zkasio::error_code ignored;
  for (auto& path : locks) co_await s.async_remove(path, asio::redirect_error(asio::use_awaitable, ignored));
  co_await s.async_remove(dir, asio::redirect_error(asio::use_awaitable, ignored));
}

// Runs every coroutine concurrently until all are done, then rethrows the
// first failure: on this coroutine's executor, or on `on` (a pool's: their
// completions still come back to this one's, which must be a strand if its
// io_context has several threads).
inline asio::awaitable<void> run_all(std::vector<asio::awaitable<void>> work,
                                     std::optional<asio::any_io_executor> on = std::nullopt) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer all_done(executor, asio::steady_timer::time_point::max());
  std::size_t remaining = work.size();
  std::exception_ptr failure;
  for (auto& w : work)
    asio::co_spawn(on.value_or(executor), std::move(w), asio::bind_executor(executor, [&](std::exception_ptr e) {
                     if (e && !failure) failure = e;
                     if (--remaining == 0) all_done.cancel();
                   }));
  if (remaining) co_await all_done.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  if (failure) std::rethrow_exception(failure);
}

// A session lives (and keeps its io_context running) until closed.
inline asio::awaitable<void> close_all(session_list& sessions) {
  std::vector<asio::awaitable<void>> closes;
  for (auto& s : sessions) closes.push_back(s->async_close(asio::use_awaitable));
  co_await run_all(std::move(closes));
}

}  // namespace zkasio::bench
