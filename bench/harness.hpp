// What every zkasio benchmark does: open sessions on a fresh io_context, run
// its coroutine on the one thread to the end; an exception ends the program
// (a benchmark that failed has nothing to report).
#pragma once

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
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

}  // namespace zkasio::bench
