#include "c_client_scope.hpp"

#include <atomic>
#include <chrono>
#include <string_view>

namespace zkasio::detail {
namespace {

std::recursive_mutex c_client_mutex;
thread_local const session_options* current_options = nullptr;

// The statistics, while counting: relaxed atomics, a clock read at each end
// of an outermost scope (the C client's calls take microseconds).
using stats_clock = std::chrono::steady_clock;
std::atomic<bool> counting{false};
std::atomic<std::uint64_t> scopes{0}, contended{0}, wait_ns{0}, hold_ns{0}, max_hold_ns{0};
thread_local int depth = 0;
thread_local bool timed = false;  // the outermost scope of this thread is counted
thread_local stats_clock::time_point held_since;

std::uint64_t ns_since(stats_clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(stats_clock::now() - t).count());
}

}  // namespace

c_client_scope::c_client_scope(const session_options* options)
    : lock_(c_client_mutex, std::defer_lock), previous_(current_options) {
  bool count = depth == 0 && counting.load(std::memory_order_relaxed);
  if (!count) {
    lock_.lock();
  } else if (!lock_.try_lock()) {  // held by another thread (its owner's try_lock succeeds)
    auto start = stats_clock::now();
    lock_.lock();
    contended.fetch_add(1, std::memory_order_relaxed);
    wait_ns.fetch_add(ns_since(start), std::memory_order_relaxed);
  }
  if (depth++ == 0 && (timed = count)) {
    scopes.fetch_add(1, std::memory_order_relaxed);
    held_since = stats_clock::now();
  }
  current_options = options;
}

c_client_scope::~c_client_scope() {
  current_options = previous_;
  if (--depth > 0 || !timed) return;
  auto held = ns_since(held_since);
  hold_ns.fetch_add(held, std::memory_order_relaxed);
  for (auto most = max_hold_ns.load(std::memory_order_relaxed);
       held > most && !max_hold_ns.compare_exchange_weak(most, held, std::memory_order_relaxed);) {
  }
}

void count_c_client_lock(bool on) noexcept { counting.store(on, std::memory_order_relaxed); }

c_client_lock_stats take_c_client_lock_stats() noexcept {
  auto take = [](std::atomic<std::uint64_t>& counter) { return counter.exchange(0, std::memory_order_relaxed); };
  return {take(scopes), take(contended), take(wait_ns), take(hold_ns), take(max_hold_ns)};
}

void c_client_scope::forward(const char* message) {
  if (!current_options || !current_options->log) return;
  // One of the C client's lines ("Freeing zookeeper resources") comes with
  // its own newline; the sink gets every line without one.
  std::string_view line(message);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  current_options->log(line);
}

}  // namespace zkasio::detail
