// The locks through zkasio, every contender a coroutine on one thread: an
// uncontended acquire and release (its latency, and its allocations beside
// an exists'), throughput of many contenders, the
// read-heavy throughput of a shared_mutex, and scale (thousands of waiters
// queued on one thread, then drained). (The handoff is in handoff.cpp.)
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <zkasio/mutex.hpp>
#include <zkasio/shared_mutex.hpp>

#include "allocations.hpp"
#include "harness.hpp"
#include "latency.hpp"
#include "recipes/rules/lock_queue.hpp"
#include "waiting_room.hpp"

namespace zkasio::bench {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

// (warm_up_rounds: harness.hpp.)
constexpr auto warm_up_time = 500ms;

// -------------------------------------------------------------- uncontended

awaitable<void> uncontended(session_list& one, const options& o, report& r) {
  auto& s = *one[0];
  co_await s.async_connect(use_awaitable);
  auto dir = bench_dir("uncontended"), path = dir + "/lock";
  mutex m(s, path);
  auto& samples = entry(r, "acquire_release");
  for (int i = 0; i < warm_up_rounds + o.rounds; ++i) {
    auto t0 = clock::now();
    auto held = co_await m.async_acquire(use_awaitable);
    co_await held.async_release(use_awaitable);
    if (i >= warm_up_rounds) samples.add(clock::now() - t0);
  }
  // What each costs the allocator, warm: an acquire and its release, and a
  // session's operation (an exists) to compare with.
  auto before = allocations_so_far();
  for (int i = 0; i < o.rounds; ++i) {
    auto held = co_await m.async_acquire(use_awaitable);
    co_await held.async_release(use_awaitable);
  }
  add_value(r, "allocations_per_acquire_release",
            static_cast<double>(allocations_so_far() - before) / static_cast<double>(o.rounds));
  before = allocations_so_far();
  for (int i = 0; i < o.rounds; ++i) co_await s.async_exists(path, use_awaitable);
  add_value(r, "allocations_per_exists",
            static_cast<double>(allocations_so_far() - before) / static_cast<double>(o.rounds));
  co_await remove_dir(s, dir, std::vector<std::string>(1, path));
  co_await s.async_close(use_awaitable);
}

// --------------------------------------------------------------- throughput

struct contention {
  clock::time_point start, end;  // the measuring window
  std::chrono::microseconds hold;
  bool stop = false;
  bool held = false;
  std::optional<clock::time_point> released;
  std::uint64_t acquisitions = 0;
  latency& handoffs;
};

awaitable<void> contender(mutex& m, contention& c) {
  asio::steady_timer hold(co_await asio::this_coro::executor);
  while (!c.stop) {
    auto held = co_await m.async_acquire(use_awaitable);
    auto acquired = clock::now();
    if (c.held) throw std::runtime_error("two contenders held the lock at once");
    c.held = true;
    if (acquired >= c.start && acquired < c.end) {
      ++c.acquisitions;
      if (c.released) c.handoffs.add(acquired - *c.released);
    }
    if (acquired >= c.end) c.stop = true;
    if (c.hold.count()) {
      hold.expires_after(c.hold);
      co_await hold.async_wait(use_awaitable);
    }
    c.held = false;
    c.released = clock::now();
    co_await held.async_release(use_awaitable);
  }
}

// A contender on a session of its own beside a throughput run: acquires,
// releases, pauses 5 ms, and so on; `waits` are those of its acquires asked
// in the window (one starved until the others stop shows as that long).
awaitable<void> foreign_contender(mutex& m, contention& c, latency& waits) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  while (!c.stop) {
    auto asked = clock::now();
    auto held = co_await m.async_acquire(use_awaitable);
    auto acquired = clock::now();
    if (c.held) throw std::runtime_error("two contenders held the lock at once");
    c.held = true;
    if (asked >= c.start && asked < c.end) waits.add(acquired - asked);
    c.held = false;
    c.released = clock::now();
    co_await held.async_release(use_awaitable);
    pause.expires_after(std::chrono::milliseconds(5));
    co_await pause.async_wait(use_awaitable);
  }
}

awaitable<void> connect_all(session_list& sessions) {
  for (auto& s : sessions) co_await s->async_connect(use_awaitable);
}

// One lock object (a Lock) per session on `path`: its contenders share what
// it knows of the queue. (Not a coroutine: g++ 12 destroys an aggregate
// parameter of a coroutine, given as a temporary, twice.)
template <class Lock, class Options = lock_options>
std::vector<Lock> one_per_session(session_list& sessions, const std::string& path, const Options& options = {}) {
  std::vector<Lock> locks;
  for (auto& s : sessions) locks.emplace_back(*s, path, options);
  return locks;
}

// The measuring window: --seconds long, after the warm-up.
std::pair<clock::time_point, clock::time_point> measuring_window(const options& o) {
  auto start = clock::now() + warm_up_time;
  return {start, start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.seconds))};
}

awaitable<void> throughput(session_list& sessions, const options& o, report& r) {
  auto dir = bench_dir("throughput"), path = dir + "/lock";
  mutex_options options;
  if (o.local_handoff >= 0)
    options.local_handoff = local_handoff_bound{.max_run = static_cast<std::size_t>(o.local_handoff),
                                                .max_time = std::chrono::milliseconds(o.max_time_ms)};
  co_await connect_all(sessions);
  auto mutexes = one_per_session<mutex>(sessions, path, options);
  // (The foreign contender's session is the last: a plain mutex of its own.)
  std::optional<mutex> foreign;
  if (o.foreign) {
    mutexes.pop_back();
    foreign.emplace(*sessions.back(), path);
  }
  auto [start, end] = measuring_window(o);
  contention c{.start = start,
               .end = end,
               .hold = std::chrono::microseconds(o.hold_us),
               .released = {},
               .handoffs = entry(r, "handoff")};
  std::vector<awaitable<void>> work;
  for (int i = 0; i < o.contenders; ++i) work.push_back(contender(mutexes[i % mutexes.size()], c));
  if (foreign) work.push_back(foreign_contender(*foreign, c, entry(r, "foreign_wait")));
  co_await run_all(std::move(work));
  add_value(r, "acquisitions_per_s", static_cast<double>(c.acquisitions) / o.seconds);
  co_await remove_dir(*sessions.front(), dir, std::vector<std::string>(1, path));
  co_await close_all(sessions);
}

// --------------------------------------------------------------- read-heavy

struct readers_and_writers {
  clock::time_point start, end;  // the measuring window
  std::chrono::microseconds hold;
  bool stop = false;
  int readers = 0, writers = 0;  // holding now
  std::uint64_t reads = 0, writes = 0;
};

// Loops on the read or the write lock until the window has passed, holding
// each grant `hold`; checks that writers hold alone.
awaitable<void> reader_or_writer(shared_mutex& m, readers_and_writers& c, bool write) {
  asio::steady_timer hold(co_await asio::this_coro::executor);
  while (!c.stop) {
    lock held;
    if (write) held = co_await m.async_acquire(use_awaitable);
    else held = co_await m.async_acquire_shared(use_awaitable);
    auto acquired = clock::now();
    if (c.writers > 0 || (write && c.readers > 0)) throw std::runtime_error("a writer held beside another holder");
    ++(write ? c.writers : c.readers);
    if (acquired >= c.start && acquired < c.end) ++(write ? c.writes : c.reads);
    if (acquired >= c.end) c.stop = true;
    if (c.hold.count()) {
      hold.expires_after(c.hold);
      co_await hold.async_wait(use_awaitable);
    }
    --(write ? c.writers : c.readers);
    co_await held.async_release(use_awaitable);
  }
}

// Every 11th contender a writer (10 readers : 1 writer), over the sessions.
awaitable<void> read_heavy(session_list& sessions, const options& o, report& r) {
  auto dir = bench_dir("read-heavy"), path = dir + "/lock";
  co_await connect_all(sessions);
  auto locks = one_per_session<shared_mutex>(sessions, path);
  auto [start, end] = measuring_window(o);
  readers_and_writers c{.start = start, .end = end, .hold = std::chrono::microseconds(o.hold_us)};
  std::vector<awaitable<void>> work;
  for (int i = 0; i < o.contenders; ++i)
    work.push_back(reader_or_writer(locks[i % locks.size()], c, i % 11 == 10));
  co_await run_all(std::move(work));
  add_value(r, "reads_per_s", static_cast<double>(c.reads) / o.seconds);
  add_value(r, "writes_per_s", static_cast<double>(c.writes) / o.seconds);
  add_value(r, "acquisitions_per_s", static_cast<double>(c.reads + c.writes) / o.seconds);
  co_await remove_dir(*sessions.front(), dir, std::vector<std::string>(1, path));
  co_await close_all(sessions);
}

// -------------------------------------------------------------------- scale

awaitable<void> scale(session_list& sessions, const options& o, report& r) {
  for (auto& s : sessions) co_await s->async_connect(use_awaitable);
  auto dir = bench_dir("scale");
  waiting_room room(sessions, dir, static_cast<std::size_t>(o.locks));
  co_await room.hold_gates();
  auto rss_before = resident_bytes();
  auto drained = co_await room.queue_and_drain(
      static_cast<std::size_t>(o.waiters),
      [&] {
        add_value(r, "threads", static_cast<double>(process_status("Threads:")));
        add_value(r, "rss_bytes_per_waiter",
                  static_cast<double>(resident_bytes() - rss_before) / static_cast<double>(o.waiters));
      },
      o.waiter == "callback" ? waiter_kind::callback : waiter_kind::coroutine);
  add_value(r, "waiters", static_cast<double>(o.waiters));
  add_value(r, "granted", static_cast<double>(drained.granted_once));
  add_value(r, "in_order", drained.in_order);
  add_value(r, "drain_s", drained.drain_s);
  r.sound = drained.granted_once == static_cast<std::size_t>(o.waiters) && drained.in_order;
  co_await remove_dir(*sessions.front(), dir, room.paths());
  co_await close_all(sessions);
}

}  // namespace

report run_uncontended(const options& o) { return run_with_sessions(o, 1, "uncontended", uncontended); }
report run_throughput(const options& o) {
  return run_with_sessions(o, o.sessions + (o.foreign ? 1 : 0), "throughput", throughput);
}
report run_read_heavy(const options& o) { return run_with_sessions(o, o.sessions, "read-heavy", read_heavy); }
report run_scale(const options& o) { return run_with_sessions(o, o.sessions, "scale", scale); }

}  // namespace zkasio::bench
