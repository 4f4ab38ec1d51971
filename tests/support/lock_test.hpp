// What the lock tests share: the lock nodes the server has under a path, and
// a bounded wait for their number.
#pragma once

#include <doctest/doctest.h>

#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>
#include <zkasio/mutex.hpp>
#include <zkasio/session.hpp>

#include "recipes/rules/lock_queue.hpp"
#include "recipes/rules/queue_rule.hpp"
#include "support/async.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

namespace zkasio::test {

// An acquire's outcome, for acquires started with a callback.
struct acquire_outcome {
  explicit acquire_outcome(asio::io_context& io) : done(io.get_executor()) {}
  std::optional<zkasio::error_code> ec;
  lock held;
  test_event done;
  auto handler() {
    return [this](zkasio::error_code e, lock l) {
      ec = e;
      held = std::move(l);
      done.count();
    };
  }
};

// Granted without error.
inline asio::awaitable<bool> granted(acquire_outcome& w) {
  bool done = co_await w.done.wait(std::chrono::seconds(10));
  co_return done && !*w.ec && w.held.held();
}

// A mutex's options that hand the lock over in memory (local_handoff) within
// these bounds.
inline mutex_options handing_over(std::size_t max_run = 16,
                                  std::chrono::milliseconds max_time = std::chrono::hours(1)) {
  return {.local_handoff = local_handoff_bound{.max_run = max_run, .max_time = max_time}};
}

// Beside the proxied server: a holder's session straight to the server and a
// waiter's session through the proxy, whose reads fail at once when cut off
// (read_retry_timeout 0), so that a test can fail any read of the waiter.
struct holder_and_proxied_waiter : proxied_server {
  static session_options reads_fail_at_once(session_options options) {
    options.read_retry_timeout = std::chrono::milliseconds(0);
    return options;
  }
  session holder{io, test_options(servers.hosts(), std::chrono::seconds(10))};
  session s{io, reads_fail_at_once(test_options(proxy.address(), std::chrono::seconds(10)))};

  // Once the waiter's session is connected: its generation.
  asio::awaitable<std::uint64_t> waiter_connected() {
    co_await s.async_connect();  // (its reads do not wait for the connection)
    co_await s.async_exists("/");
    co_return s.generation();
  }

  // The waiter `w` after its cut: granted without error, its session the
  // same (of `generation`): it rode through.
  asio::awaitable<void> rode_through(acquire_outcome& w, std::uint64_t generation) {
    REQUIRE(co_await w.done.wait(std::chrono::seconds(10)));
    CHECK_FALSE(*w.ec);
    CHECK(w.held.held());
    CHECK(s.generation() == generation);
  }
};

// When a lock's lost signal fired: `fired` happens then, `at` says when.
struct lost_signal_log {
  explicit lost_signal_log(asio::io_context& io) : fired(io.get_executor()) {}
  void watch(lock& held) {
    held.lost_slot().assign([this](asio::cancellation_type) {
      at = std::chrono::steady_clock::now();
      fired.count();
    });
  }
  test_event fired;
  std::chrono::steady_clock::time_point at{};
};

using zkasio::detail::queue_family;

// `count` sessions on the shared server (10 s timeouts), each with its own
// lock object of type Object on one path (made with `args`); the i-th
// contender of a test uses object i % count.
template <class Object>
struct objects_over_sessions {
  template <class... Args>
  objects_over_sessions(asio::io_context& io, const std::string& name, int count, const Args&... args)
      : path(unique_path(name)) {
    for (int i = 0; i < count; ++i) {
      sessions.push_back(std::make_unique<session>(io, test_options(shared_hosts(), std::chrono::seconds(10))));
      objects.push_back(std::make_unique<Object>(*sessions.back(), path, args...));
    }
  }
  Object& operator[](int i) { return *objects[static_cast<std::size_t>(i) % objects.size()]; }
  session& first_session() { return *sessions.front(); }

  std::string path;
  std::vector<std::unique_ptr<session>> sessions;
  std::vector<std::unique_ptr<Object>> objects;
};

// Runs the coroutines make(0) .. make(count - 1) on `io` together until all
// have finished (at most `limit`, else the test fails); returns how many threw.
template <class Make>
int run_coroutines(asio::io_context& io, int count, Make make, std::chrono::seconds limit) {
  int failures = 0, finished = 0;
  for (int i = 0; i < count; ++i)
    asio::co_spawn(io, make(i), [&](std::exception_ptr e) {
      failures += e != nullptr;
      ++finished;
    });
  REQUIRE(run_until(io, [&] { return finished == count; }, limit));
  return failures;
}

// The session of `held` is cut off at the proxy, with no reconnection, until
// the server expires it: its lost signal fires, and then `waiter` (behind
// it) is granted; the release of `held` says lock_lost.
inline asio::awaitable<void> holder_expires(proxied_server& f, lock& held, acquire_outcome& waiter) {
  lost_signal_log lost(f.io);
  lost.watch(held);
  f.proxy.refuse_connections(true);
  f.proxy.drop_now();
  REQUIRE(co_await lost.fired.wait(std::chrono::seconds(10)));
  REQUIRE(co_await waiter.done.wait(std::chrono::seconds(10)));
  CHECK(!*waiter.ec);
  f.proxy.refuse_connections(false);
  auto [ec] = co_await held.async_release(asio::experimental::as_tuple(asio::use_awaitable));
  CHECK(ec == error::lock_lost);
  co_await waiter.held.async_release(asio::use_awaitable);
}

// The outcome of an operation started with a callback bound to a
// cancellation signal of the test's.
template <class... Values>
struct cancellable {
  explicit cancellable(asio::io_context& io) : done(io.get_executor()) {}
  asio::cancellation_signal cancel;
  std::optional<zkasio::error_code> ec;
  test_event done;
  auto handler() {
    return asio::bind_cancellation_slot(cancel.slot(), [this](zkasio::error_code e, Values...) {
      ec = e;
      done.count();
    });
  }
};

// Launches an operation of a session through `proxy` (`launch(op.handler())`)
// with its first reply held back, cancels it (`type`: total, which a read
// honours) once its request reached the server, then lets the reply pass:
// the operation must have ended at once (within 2 s), with
// operation_aborted.
template <class... Values, class Launch>
asio::awaitable<void> cancelled_while_reply_held(tcp_proxy& proxy, cancellable<Values...>& op, Launch launch,
                                                 asio::cancellation_type type = asio::cancellation_type::total) {
  proxy.hold_replies();
  auto sent = proxy.requests_forwarded();
  auto held = proxy.frames_held();
  launch(op.handler());
  REQUIRE(co_await eventually([&] { return proxy.requests_forwarded() > sent && proxy.frames_held() > held; }));
  op.cancel.emit(type);
  bool prompt = co_await op.done.wait(std::chrono::seconds(2));
  proxy.pass();
  REQUIRE(prompt);
  CHECK(*op.ec == asio::error::operation_aborted);
}

// An operator (session `other`) deletes the node of `held`, a lock or a
// leadership: its lost wait fires, then its release (resignation) says
// lock_lost.
template <class Held>
asio::awaitable<void> deleted_by_operator(session& other, Held& held) {
  test_event lost(co_await asio::this_coro::executor);
  held.async_wait_lost([&](zkasio::error_code ec) {
    if (!ec) lost.count();
  });
  co_await other.async_remove(held.node(), asio::use_awaitable);
  REQUIRE(co_await lost.wait(std::chrono::seconds(10)));
  auto ended = asio::experimental::as_tuple(asio::use_awaitable);
  std::tuple<zkasio::error_code> outcome;
  if constexpr (requires { held.async_resign(ended); }) outcome = co_await held.async_resign(ended);
  else outcome = co_await held.async_release(ended);
  CHECK(std::get<0>(outcome) == error::lock_lost);
}

// acquire_options combine on `m`, which `me` holds (`held`): the owner
// re-enters at once whatever its timeout; another owner of the session times
// out in line, and again (its timeout left no hold of its to re-enter).
template <class Mutex>
asio::awaitable<void> owner_and_timeout_combine(Mutex& m, const owner& me, const lock& held) {
  using asio::experimental::as_tuple;
  auto timed = co_await m.async_acquire({.who = me, .timeout = std::chrono::milliseconds(0)}, asio::use_awaitable);
  CHECK(timed.fencing_token() == held.fencing_token());
  co_await timed.async_release(asio::use_awaitable);
  owner stranger;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto [timed_out, none] = co_await m.async_acquire({.who = stranger, .timeout = std::chrono::milliseconds(50)},
                                                      as_tuple(asio::use_awaitable));
    CHECK(timed_out == error::lock_timeout);
  }
}

// What a lock object's observer (lock_options::observer) heard, in order:
// give observer() to the options, then `strand` the lock object's executor
// once it is made; on_strand stays true while every event came on it.
struct observer_log {
  struct heard {
    lock_event::kind what;
    std::string path;
    std::string node;
    std::chrono::steady_clock::duration took;
    zkasio::error_code error;
  };
  std::vector<heard> events;
  std::optional<asio::any_io_executor> strand;
  bool on_strand = true;

  std::function<void(const lock_event&)> observer() {
    return [this](const lock_event& e) {
      auto* target = strand ? strand->target<asio::strand<asio::io_context::executor_type>>() : nullptr;
      on_strand = on_strand && target && target->running_in_this_thread();
      events.push_back({e.what, std::string(e.path), std::string(e.node), e.took, e.error});
    };
  }
  // The kinds heard, as "acquiring granted released".
  std::string sequence() const {
    static constexpr const char* names[] = {"acquiring", "granted", "failed", "lost", "released"};
    std::string result;
    for (auto& e : events) result += (result.empty() ? "" : " ") + std::string(names[static_cast<int>(e.what)]);
    return result;
  }
};

// Awaits `holds()` (an asio::awaitable<bool>, asked again every 5 ms) until
// it is true; false when `limit` passed first.
template <class Predicate>
asio::awaitable<bool> eventually_async(Predicate holds, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!co_await holds()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    tick.expires_after(std::chrono::milliseconds(5));
    co_await tick.async_wait(asio::use_awaitable);
  }
  co_return true;
}

// The lock nodes (of `family`) under `path`, as the server has them, in queue order.
inline asio::awaitable<std::vector<std::string>> lock_nodes(session& s, std::string path,
                                                            queue_family family = queue_family::mutex) {
  using asio::experimental::as_tuple;
  auto [ec, kids] = co_await s.async_get_children(path, as_tuple(asio::use_awaitable));
  std::vector<std::string> nodes;
  for (auto& n : zkasio::detail::lock_queue(kids.names, family)) nodes.push_back(n.name);
  co_return nodes;
}

// Waits (at most `limit`) until `path` has exactly `count` lock nodes. (Parameters
// by value: a coroutine may outlive its caller's temporaries.)
inline asio::awaitable<bool> settles_at(session& s, std::string path, std::size_t count,
                                        std::chrono::milliseconds limit = std::chrono::seconds(10),
                                        queue_family family = queue_family::mutex) {
  using namespace asio::experimental::awaitable_operators;
  using asio::experimental::as_tuple;
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto [ec, kids] = co_await s.async_get_children(path, as_tuple(asio::use_awaitable));
    if (zkasio::detail::lock_queue(kids.names, family).size() == count) co_return true;
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
    co_await (s.async_wait_children_changed(path, kids.stat.cversion, as_tuple(asio::use_awaitable)) ||
              timer.async_wait(as_tuple(asio::use_awaitable)));
  }
}

// with_lock in a caller that `cancel` cancels, over one io_context, with
// another session to play the operator that deletes a holder's node.
// The lock's session `s` goes to `hosts`, the operator's to `other_hosts`.
struct cancelled_caller {
  asio::io_context io;
  session s, other;
  std::string path;
  asio::cancellation_signal cancel;
  bool caller_throws_if_cancelled = false;  // once with_lock has ended

  explicit cancelled_caller(const std::string& name, const std::string& hosts = shared_hosts(),
                            const std::string& other_hosts = shared_hosts())
      : s(io, test_options(hosts)), other(io, test_options(other_hosts)), path(unique_path(name)) {}

  // What with_lock(m, body) said: nothing when it completed.
  template <class Body>
  zkasio::error_code with_lock_outcome(mutex& m, Body body) {
    std::optional<zkasio::error_code> outcome;
    auto caller = [&]() -> asio::awaitable<void> {
      try {
        co_await with_lock(m, std::move(body));
        outcome = zkasio::error_code{};
      } catch (const zkasio::system_error& e) {
        outcome = e.code();
      }
      // (Not an operation: a cancelled caller may still ask.)
      caller_throws_if_cancelled = co_await asio::this_coro::throw_if_cancelled();
    };
    bool ended = false;
    asio::co_spawn(io, caller(), asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr) { ended = true; }));
    REQUIRE(run_until(io, [&] { return ended; }, std::chrono::seconds(20)));
    REQUIRE(outcome.has_value());
    return *outcome;
  }

  // Nothing is left under the path; both sessions closed.
  void settle() {
    run(io, [&]() -> asio::awaitable<void> {
      CHECK(co_await settles_at(s, path, 0));
      co_await s.async_close(asio::use_awaitable);
      co_await other.async_close(asio::use_awaitable);
    }(), std::chrono::seconds(20));
  }
};

}  // namespace zkasio::test
