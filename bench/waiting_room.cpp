#include "recipes/rules/lock_queue.hpp"
#include "waiting_room.hpp"

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <fstream>
#include <malloc.h>
#include <stdexcept>
#include <system_error>
#include <zkasio/error_code.hpp>

#include "recipes/rules/queue_rule.hpp"

namespace zkasio::bench {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

long process_status(const char* field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  throw std::runtime_error(std::string("no ") + field + " in /proc/self/status");
}
long resident_bytes() { return process_status("VmRSS:") * 1024; }
long heap_in_use_bytes() {
  auto info = mallinfo2();
  return static_cast<long>(info.uordblks + info.hblkhd);
}

namespace {

// Reads `path`'s children; asked again while the connection is cut (the
// soak cuts it), until the session is over.
awaitable<children> children_of(session& s, const std::string& path) {
  for (;;) {
    auto [ec, kids] = co_await s.async_get_children(path, as_tuple(use_awaitable));
    if (!ec) co_return kids;
    if (ec != condition::retryable) throw zkasio::system_error(ec, "listing " + path);
    co_await s.async_connect(use_awaitable);
  }
}

}  // namespace

awaitable<std::size_t> lock_node_count(session& s, const std::string& path) {
  co_return detail::lock_queue((co_await children_of(s, path)).names).size();
}

namespace {

detail::sequence_number sequence_of(const std::string& node) {
  return detail::parse_lock_node(node.substr(node.rfind('/') + 1))->sequence;
}

struct queue_log {
  std::vector<std::vector<detail::sequence_number>> granted;  // per lock: in grant order
  std::vector<std::uint8_t> grants;                           // per waiter
  std::size_t finished = 0;

  // Waiter `index`, of the lock `lock_index`, was granted `held`.
  void record_grant(std::size_t index, std::size_t lock_index, const lock& held) {
    ++grants[index];
    granted[lock_index].push_back(sequence_of(held.node()));
  }
};

awaitable<void> waiter(mutex& m, queue_log& log, std::size_t index, std::size_t lock_index) {
  auto [ec, held] = co_await m.async_acquire(as_tuple(use_awaitable));
  if (ec) throw zkasio::system_error(ec, "a waiter's acquire");
  log.record_grant(index, lock_index, held);
  auto [release_ec] = co_await held.async_release(as_tuple(use_awaitable));
  if (release_ec) throw zkasio::system_error(release_ec, "a waiter's release");
}

// The same waiter as plain completion handlers, without a coroutine of its
// own: what a waiting acquire costs the library alone. `finished` is told
// the end (an error, or nothing).
struct callback_waiter {
  queue_log* log;
  std::size_t index, lock_index;
  const std::function<void(std::exception_ptr)>* finished;

  void operator()(zkasio::error_code ec, lock held) const {
    if (ec) return (*finished)(std::make_exception_ptr(zkasio::system_error(ec, "a waiter's acquire")));
    log->record_grant(index, lock_index, held);
    held.async_release([finished = finished](zkasio::error_code release_ec) {
      (*finished)(release_ec ? std::make_exception_ptr(zkasio::system_error(release_ec, "a waiter's release"))
                             : nullptr);
    });
  }
};

// Waits until `done` holds, looking every `period`; fails after `limit`.
template <class Condition, class Describe>
awaitable<void> wait_for(Condition done, std::chrono::milliseconds period, std::chrono::seconds limit,
                         Describe what) {
  auto deadline = clock::now() + limit;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  while (!co_await done()) {
    if (clock::now() > deadline) throw std::runtime_error(what() + " within the time limit");
    pause.expires_after(period);
    co_await pause.async_wait(use_awaitable);
  }
}

}  // namespace

waiting_room::waiting_room(session_list& sessions, const std::string& dir, std::size_t locks)
    : sessions_(sessions), mutexes_(sessions.size()), gates_(locks) {
  for (std::size_t j = 0; j < locks; ++j) paths_.push_back(dir + "/lock" + std::to_string(j));
  for (std::size_t i = 0; i < sessions.size(); ++i)
    for (auto& path : paths_) mutexes_[i].emplace_back(*sessions[i], path);
}

awaitable<void> waiting_room::hold_gates() {
  std::vector<awaitable<void>> work;
  for (std::size_t j = 0; j < gates_.size(); ++j)
    work.push_back([](mutex& m, lock& gate) -> awaitable<void> {
      gate = co_await m.async_acquire(use_awaitable);
    }(mutexes_[0][j], gates_[j]));
  co_await run_all(std::move(work));
}

awaitable<drain_result> waiting_room::queue_and_drain(std::size_t waiters, std::function<void()> queued,
                                                      waiter_kind kind) {
  auto executor = co_await asio::this_coro::executor;
  const auto locks = paths_.size();
  queue_log log{.granted = std::vector<std::vector<detail::sequence_number>>(locks),
                .grants = std::vector<std::uint8_t>(waiters)};
  asio::steady_timer all_finished(executor, asio::steady_timer::time_point::max());
  std::exception_ptr failure;
  const std::function<void(std::exception_ptr)> finished = [&](std::exception_ptr e) {
    if (e && !failure) failure = e;
    if (++log.finished == waiters) all_finished.cancel();
  };
  for (std::size_t i = 0; i < waiters; ++i) {
    auto lock_index = i % locks, session_index = (i / locks) % sessions_.size();
    auto& m = mutexes_[session_index][lock_index];
    if (kind == waiter_kind::coroutine)
      asio::co_spawn(executor, waiter(m, log, i, lock_index), finished);
    else
      m.async_acquire(callback_waiter{&log, i, lock_index, &finished});
  }
  // Every waiter queued: all nodes are there, and after two more round trips
  // of each session (the first answered after every listing, the second
  // after what the waiters sent on seeing theirs) every waiter waits.
  std::size_t nodes = 0;
  co_await wait_for(
      [&]() -> awaitable<bool> {
        if (failure) std::rethrow_exception(failure);  // a waiter that failed never queues
        nodes = 0;
        for (auto& path : paths_) nodes += co_await lock_node_count(*sessions_.front(), path);
        co_return nodes >= waiters + locks;
      },
      50ms, 600s, [&] {
        return "the waiters did not all queue (" + std::to_string(nodes) + " nodes of " +
               std::to_string(waiters + locks) + ", " + std::to_string(log.finished) + " waiters ended)";
      });
  for (int round = 0; round < 2; ++round)
    for (auto& s : sessions_) co_await children_of(*s, "/zookeeper");
  queued();

  auto drain_start = clock::now();
  for (auto& gate : gates_) co_await gate.async_release(use_awaitable);
  asio::steady_timer limit(executor, 600s);
  if (log.finished < waiters)
    co_await (all_finished.async_wait(as_tuple(use_awaitable)) || limit.async_wait(use_awaitable));
  if (log.finished < waiters) throw std::runtime_error("the queues did not drain within 600 s");
  if (failure) std::rethrow_exception(failure);
  drain_result result;
  result.drain_s = std::chrono::duration<double>(clock::now() - drain_start).count();
  for (auto g : log.grants) result.granted_once += g == 1;
  for (std::size_t j = 0; j < locks; ++j) {
    auto& order = log.granted[j];
    result.in_order = result.in_order && order.size() == waiters / locks + (j < waiters % locks) &&
                      std::adjacent_find(order.begin(), order.end(), [](auto a, auto b) {
                        return !detail::sequence_before(a, b);
                      }) == order.end();
  }
  co_return result;
}

}  // namespace zkasio::bench
