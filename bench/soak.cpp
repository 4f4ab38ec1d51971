// soak: rounds of W waiters on one lock across S sessions, each round queued
// behind a gate and drained, until N acquisitions, while the connections
// are cut every few milliseconds (the sessions talk through one proxy, so
// that they share one connect string as a process's sessions do; the
// sessions live on, the waiters ride through). Every waiter must be
// granted exactly once, in order, nothing may be left on the server, and the
// memory must come back: RSS after the first round and at the end.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdio>
#include <malloc.h>
#include <memory>

#include "harness.hpp"
#include "latency.hpp"
#include "support/tcp_proxy.hpp"
#include "waiting_room.hpp"

namespace zkasio::bench {

using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

// Cuts every session's connection, every `period`, until stopped.
struct connection_cutter {
  test::tcp_proxy& proxy;
  std::chrono::milliseconds period;
  asio::steady_timer tick;
  bool stopped = false;
  std::size_t cuts = 0;

  awaitable<void> run() {
    while (!stopped) {
      tick.expires_after(period);
      co_await tick.async_wait(asio::experimental::as_tuple(use_awaitable));
      if (stopped) break;
      proxy.drop_now();
      ++cuts;
    }
  }
  void stop() {
    stopped = true;
    tick.cancel();
  }
};

}  // namespace

report run_soak(const options& o) {
  const auto waiters = static_cast<std::size_t>(o.waiters);
  const auto rounds = static_cast<std::size_t>((o.acquisitions + o.waiters - 1) / o.waiters);
  test::tcp_proxy proxy(o.hosts.substr(0, o.hosts.find(',')));
  asio::io_context io(1);
  session_list sessions;
  for (int i = 0; i < o.sessions; ++i)
    sessions.push_back(std::make_unique<session>(
        io, session_options{.hosts = proxy.address(), .session_timeout = std::chrono::seconds(30)}));
  report r;
  connection_cutter cutter{proxy, std::chrono::milliseconds(o.cut_every_ms), asio::steady_timer(io)};
  run_to_end(
      io,
      [&]() -> awaitable<void> {
        for (auto& s : sessions) co_await s->async_connect(use_awaitable);
        std::vector<std::uint64_t> generations;
        for (auto& s : sessions) generations.push_back(s->generation());
        auto dir = bench_dir("soak");
        waiting_room room(sessions, dir, 1);
        asio::co_spawn(co_await asio::this_coro::executor, cutter.run(), asio::detached);
        long rss_first = 0, rss_most = 0, heap_first = 0;
        std::size_t exactly_once_rounds = 0;
        auto start = clock::now();
        for (std::size_t round = 0; round < rounds; ++round) {
          co_await room.hold_gates();
          auto drained = co_await room.queue_and_drain(waiters, [] {});
          exactly_once_rounds += drained.granted_once == waiters && drained.in_order;
          auto rss = resident_bytes(), heap = heap_in_use_bytes();
          if (round == 0) rss_first = rss, heap_first = heap;
          rss_most = std::max(rss_most, rss);
          std::fprintf(stderr, "soak: round %zu of %zu, %.1f s, RSS %.1f MB, heap in use %.1f MB, %zu cuts\n",
                       round + 1, rounds, std::chrono::duration<double>(clock::now() - start).count(),
                       static_cast<double>(rss) / 1e6, static_cast<double>(heap) / 1e6, cutter.cuts);
        }
        cutter.stop();
        auto seconds = std::chrono::duration<double>(clock::now() - start).count();
        auto rss_end = resident_bytes(), heap_end = heap_in_use_bytes();
        // What of the RSS at the end malloc only kept after the peaks: given
        // back, what is left is what the process holds.
        malloc_trim(0);
        auto rss_trimmed = resident_bytes();
        std::size_t left = 0;
        for (auto& path : room.paths()) left += co_await lock_node_count(*sessions.front(), path);
        bool sessions_lived = true;
        for (std::size_t i = 0; i < sessions.size(); ++i)
          sessions_lived = sessions_lived && sessions[i]->generation() == generations[i];
        add_value(r, "waiters", static_cast<double>(waiters));
        add_value(r, "sessions", static_cast<double>(sessions.size()));
        add_value(r, "rounds", static_cast<double>(rounds));
        add_value(r, "acquisitions", static_cast<double>(rounds * waiters));
        add_value(r, "rounds_granted_once_in_order", static_cast<double>(exactly_once_rounds));
        add_value(r, "connection_cuts", static_cast<double>(cutter.cuts));
        add_value(r, "nodes_left", static_cast<double>(left));
        add_value(r, "sessions_lived", sessions_lived);
        add_value(r, "rss_after_first_round_bytes", static_cast<double>(rss_first));
        add_value(r, "rss_end_bytes", static_cast<double>(rss_end));
        add_value(r, "rss_most_bytes", static_cast<double>(rss_most));
        add_value(r, "rss_end_after_malloc_trim_bytes", static_cast<double>(rss_trimmed));
        add_value(r, "heap_in_use_after_first_round_bytes", static_cast<double>(heap_first));
        add_value(r, "heap_in_use_end_bytes", static_cast<double>(heap_end));
        add_value(r, "acquisitions_per_s", static_cast<double>(rounds * waiters) / seconds);
        r.sound = exactly_once_rounds == rounds && left == 0;
        co_await remove_dir(*sessions.front(), dir, room.paths());
        co_await close_all(sessions);
      }(),
      "soak");
  return r;
}

}  // namespace zkasio::bench
