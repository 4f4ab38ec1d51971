// global-lock: what the process-wide C-client lock (src/session/c_client_scope.hpp)
// costs when sessions share one io_context run by several threads. S
// sessions, each its own coroutine doing N rounds of sync + get_data on its
// own node (they share nothing but the process, so the lock), run twice on
// fresh io_contexts: on 1 thread (the lock is never contended) and on T.
#include <unistd.h>

#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>
#include <zkasio/session.hpp>

#include "session/c_client_scope.hpp"
#include "harness.hpp"
#include "latency.hpp"

namespace zkasio::bench {
namespace {

using asio::awaitable;
using asio::use_awaitable;

struct worker {
  std::unique_ptr<session> s;
  std::string node;
  latency sync, get_data;
};

awaitable<void> rounds(worker& w, int n) {
  for (int i = 0; i < n; ++i) {
    auto t0 = clock::now();
    co_await w.s->async_sync(w.node, use_awaitable);
    auto t1 = clock::now();
    co_await w.s->async_get_data(w.node, use_awaitable);
    w.sync.add(t1 - t0);
    w.get_data.add(clock::now() - t1);
  }
}

// The lock's use over `ops` operations in `wall_s` seconds, as values
// suffixed `t` ("_1t", "_4t").
void add_lock_figures(report& r, const std::string& t, double ops, double wall_s) {
  auto st = detail::take_c_client_lock_stats();
  auto per_op = [&](std::uint64_t n) { return static_cast<double>(n) / ops; };
  add_value(r, "lock_scopes_per_op" + t, per_op(st.scopes));
  add_value(r, "lock_contended_fraction" + t,
            st.scopes ? static_cast<double>(st.contended) / static_cast<double>(st.scopes) : 0.0);
  add_value(r, "lock_wait_us_per_op" + t, per_op(st.wait_ns) / 1e3);
  add_value(r, "lock_held_fraction" + t, static_cast<double>(st.hold_ns) / 1e9 / wall_s);
  add_value(r, "lock_max_hold_us" + t, static_cast<double>(st.max_hold_ns) / 1e3);
}

// On a strand: run_all's completions come back to it from the pool.
awaitable<void> phase(std::vector<worker>& workers, const options& o, int threads, report& r,
                      asio::any_io_executor pool) {
  const std::string dir = "/zkasio-bench-global-lock-" + std::to_string(getpid()) + "-" + std::to_string(threads);
  zkasio::error_code ignored;
  for (auto& w : workers) co_await w.s->async_connect(use_awaitable);
  co_await workers[0].s->async_create(dir, "", asio::redirect_error(use_awaitable, ignored));
  for (std::size_t i = 0; i < workers.size(); ++i) {
    workers[i].node = dir + "/s" + std::to_string(i);
    co_await workers[i].s->async_create(workers[i].node, std::string(64, 'x'), use_awaitable);
  }
  for (auto& w : workers) co_await rounds(w, 20);  // warm-up
  for (auto& w : workers) w.sync = w.get_data = latency{};
  detail::count_c_client_lock(true);
  detail::take_c_client_lock_stats();

  auto start = clock::now();
  std::vector<awaitable<void>> work;
  for (auto& w : workers) work.push_back(rounds(w, o.rounds));
  co_await run_all(std::move(work), pool);
  double wall_s = std::chrono::duration<double>(clock::now() - start).count();

  const std::string t = "_" + std::to_string(threads) + "t";
  const double ops = 2.0 * o.rounds * static_cast<double>(workers.size());
  add_value(r, "ops_per_s" + t, ops / wall_s);
  for (auto& w : workers) {
    entry(r, "sync" + t).merge(w.sync);
    entry(r, "get_data" + t).merge(w.get_data);
  }
  add_lock_figures(r, t, ops, wall_s);

  std::vector<std::string> nodes;
  for (auto& w : workers) nodes.push_back(w.node);
  co_await remove_dir(*workers[0].s, dir, std::move(nodes));
  // A connected session's close waits for its answer under the lock.
  for (auto& w : workers) co_await w.s->async_close(use_awaitable);
  add_value(r, "lock_max_hold_us_closing" + t,
            static_cast<double>(detail::take_c_client_lock_stats().max_hold_ns) / 1e3);
}

// One phase on a fresh io_context run by `threads` threads.
void run_phase(const options& o, int threads, report& r) {
  asio::io_context io(threads);
  std::vector<worker> workers(static_cast<std::size_t>(o.sessions));
  for (auto& w : workers)
    w.s = std::make_unique<session>(io, session_options{.hosts = o.hosts, .session_timeout = std::chrono::seconds(30)});
  bool failed = false;
  asio::co_spawn(asio::make_strand(io), phase(workers, o, threads, r, io.get_executor()),
                 [&](std::exception_ptr e) {
                   if (!e) return;
                   failed = true;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                     std::cerr << "zkasio-bench global-lock: " << x.what() << '\n';
                   }
                   for (auto& w : workers) w.s->async_close(asio::detached);
                 });
  // Every session is closed at the end: run() then returns on every thread.
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  if (failed) r.sound = false;
}

}  // namespace

report run_global_lock(const options& o) {
  report r;
  add_value(r, "sessions", static_cast<double>(o.sessions));
  add_value(r, "threads", static_cast<double>(o.threads));
  run_phase(o, 1, r);
  if (o.threads > 1) run_phase(o, o.threads, r);
  return r;
}

}  // namespace zkasio::bench
