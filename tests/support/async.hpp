// Running coroutines in tests: every run is bounded, so a bug fails the test
// instead of hanging the suite.
#pragma once

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zkasio/error_code.hpp>

namespace zkasio::test {

// Runs `task` on `io` (its other work included) until the task finishes, and
// returns its result; throws if `timeout` passes first or the task threw.
template <class T>
T run(asio::io_context& io, asio::awaitable<T> task,
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::optional<T> result;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, T value) {
    done = true;
    error = e;
    if (!e) result.emplace(std::move(value));
  });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_until(deadline);
  }
  if (!done) throw std::runtime_error("the task did not finish within " +
                                      std::to_string(timeout.count()) + " ms");
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

inline void run(asio::io_context& io, asio::awaitable<void> task,
                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  run(io, [](asio::awaitable<void> t) -> asio::awaitable<bool> {
    co_await std::move(t);
    co_return true;
  }(std::move(task)), timeout);
}

// Runs `io` until `done()` holds; false if `timeout` passed first.
template <class Predicate>
bool run_until(asio::io_context& io, Predicate done,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_until(deadline);
  }
  return done();
}

// Awaits a condition that another thread makes true (a proxy's cut, say),
// keeping the caller's executor running meanwhile: true once `holds()`,
// false when `timeout` passed first.
template <class Predicate>
asio::awaitable<bool> eventually(Predicate holds,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!holds()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    tick.expires_after(std::chrono::milliseconds(1));
    co_await tick.async_wait(asio::use_awaitable);
  }
  co_return true;
}

// Something a test waits for: callbacks count towards it, a coroutine awaits
// it with a bound.
class test_event {
 public:
  explicit test_event(const asio::any_io_executor& executor, int needed = 1)
      : timer_(executor, asio::steady_timer::time_point::max()), needed_(needed) {}

  void count() {
    if (++count_ >= needed_) timer_.cancel();
  }
  int counted() const { return count_; }
  bool happened() const { return count_ >= needed_; }

  // True once it happened; false when `timeout` passed first.
  asio::awaitable<bool> wait(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (happened()) co_return true;
    timer_.expires_after(timeout);
    zkasio::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return happened();
  }

 private:
  asio::steady_timer timer_;
  int needed_;
  int count_ = 0;
};

// Waits (from a thread that runs no io_context) until `holds()`; false after `timeout`.
template <class Predicate>
bool poll_until(Predicate holds, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!holds()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Runs `io` on `count` threads of its own until destroyed, which lets the
// io_context's run() return (once the objects on it are closed) and joins
// them: for a test whose body, on the main thread, keeps one strand busy
// while the others go on.
class io_threads {
 public:
  io_threads(asio::io_context& io, int count) : work_(io.get_executor()) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([&io] { io.run(); });
  }
  ~io_threads() {
    work_.reset();
    for (auto& t : threads_) t.join();
  }
  io_threads(const io_threads&) = delete;
  io_threads& operator=(const io_threads&) = delete;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

// Runs `io` on a thread of its own while it lives, so that the sessions on
// it keep their heartbeats while the test's thread waits on something else
// (a child process that runs for seconds under a sanitizer: without them a
// session would expire under its lock); stopped and joined at its end, and
// `io` ready to run again on the test's thread (what was queued stays).
// (Not io_threads: that waits for run() to return, which a session's
// heartbeats never let it do.)
class running_meanwhile {
 public:
  explicit running_meanwhile(asio::io_context& io) : io_(io), thread_([&io] {
    auto work = asio::make_work_guard(io);
    io.run();
  }) {}
  ~running_meanwhile() {
    io_.stop();
    thread_.join();
    io_.restart();
  }
  running_meanwhile(const running_meanwhile&) = delete;
  running_meanwhile& operator=(const running_meanwhile&) = delete;

 private:
  asio::io_context& io_;
  std::thread thread_;
};

}  // namespace zkasio::test
