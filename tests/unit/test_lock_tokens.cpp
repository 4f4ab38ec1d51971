// zkasio::lock's operations with every kind of completion token, on a lock
// that never held (no server: each completes with not_held at once). Each
// operation is one async_initiate with one completion signature, so
// deferred, parallel_group, use_future, as_tuple, redirect_error and plain
// callbacks all compile and complete, on the handler's executor. (A held
// lock's operations with these tokens: test_mutex.) And what the with_*
// helpers and lock objects are, checked at compile time; every operation of
// the API compiled with every kind of token is token_matrix.cpp, beside it.
#include <doctest/doctest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <array>
#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <zkasio/election.hpp>
#include <zkasio/lock.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

using zkasio::error;
using zkasio::lock;
using zkasio::op_result;

namespace {

// Runs `io` until it has no more work.
void settle(asio::io_context& io) {
  io.restart();
  io.run();
}

// Options, braced or a non-const lvalue, pick the options' overload (the
// token parameter of the other would take an lvalue, and fail to compile).
static_assert(requires(zkasio::mutex& m, zkasio::race_mutex& race, zkasio::shared_mutex& rw, zkasio::owner& me,
                       zkasio::acquire_options& options, const zkasio::acquire_options& fixed) {
  m.async_acquire({.who = me});
  m.async_acquire(options);
  m.async_acquire(fixed);
  m.async_acquire({});
  rw.async_acquire_shared({});
  race.async_acquire({.who = me});
  race.async_acquire(options);
  rw.async_acquire({.who = me});
  rw.async_acquire(options);
  rw.async_acquire_shared({.who = me});
  rw.async_acquire_shared(options);
});

// The with_* helpers and the default token in a coroutine of another
// executor type than any_io_executor: compiled, every template instantiated
// (run on a thread pool's strand by test_lock_threads's with_lock test).
using strand_executor = asio::strand<asio::io_context::executor_type>;
using strand_token = asio::use_awaitable_t<strand_executor>;
[[maybe_unused]] asio::awaitable<int, strand_executor> every_helper_on_a_strand(
    zkasio::session& s, zkasio::mutex& m, zkasio::race_mutex& race, zkasio::shared_mutex& rw, zkasio::election& e) {
  auto held = co_await m.async_acquire(strand_token{});
  co_await held.async_release(strand_token{});
  int n = co_await zkasio::with_lock(m, [](const lock&) -> asio::awaitable<int, strand_executor> { co_return 1; });
  co_await zkasio::with_lock(race, []() -> asio::awaitable<void, strand_executor> { co_return; });
  co_await zkasio::with_lock(rw, []() -> asio::awaitable<void, strand_executor> { co_return; });
  co_await zkasio::with_shared_lock(rw, []() -> asio::awaitable<void, strand_executor> { co_return; });
  co_await zkasio::with_leadership(e, "x", []() -> asio::awaitable<void, strand_executor> { co_return; });
  co_return co_await zkasio::with_session(s, [n](zkasio::session&) -> asio::awaitable<int, strand_executor> {
    co_return n;
  });
}
// A lock object is one lock: moved, never copied (a copy would share its
// contenders and reentrancy with the original, unlike any mutex).
template <class T>
constexpr bool moved_not_copied = !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
                                  std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;
static_assert(moved_not_copied<zkasio::mutex> && moved_not_copied<zkasio::race_mutex> &&
              moved_not_copied<zkasio::shared_mutex> && moved_not_copied<zkasio::semaphore> &&
              moved_not_copied<zkasio::election>);
static_assert(std::is_same_v<zkasio::default_token, asio::use_awaitable_t<>>,
              "the default token is pinned: the same on every Asio version");

}  // namespace

TEST_CASE("deferred: nothing happens until launched, then not_held") {
  asio::io_context io;
  lock none;
  auto release = none.async_release(asio::experimental::deferred);
  auto wait = none.async_wait_lost(asio::experimental::deferred);
  auto multi = none.async_guarded_multi({}, asio::experimental::deferred);
  std::optional<zkasio::error_code> released, waited, written;
  auto strand = asio::make_strand(io);
  std::move(release)(asio::bind_executor(strand, [&](zkasio::error_code ec) {
    CHECK(strand.running_in_this_thread());
    released = ec;
  }));
  std::move(wait)(asio::bind_executor(strand, [&](zkasio::error_code ec) { waited = ec; }));
  std::move(multi)(asio::bind_executor(strand, [&](zkasio::error_code ec, std::vector<op_result> results) {
    CHECK(results.empty());
    written = ec;
  }));
  CHECK_FALSE(released);  // completed through the executor, never inline
  settle(io);
  CHECK(released == error::not_held);
  CHECK(waited == error::not_held);
  CHECK(written == error::not_held);
}

TEST_CASE("use_future, as_tuple and redirect_error") {
  asio::io_context io;
  lock none;
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  // use_future: the error as an exception.
  auto future = none.async_release(asio::bind_executor(io, asio::use_future));
  REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK_THROWS_AS(future.get(), zkasio::system_error);
  guard.reset();
  runner.join();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec] = co_await none.async_wait_lost(asio::experimental::as_tuple(asio::use_awaitable));
        CHECK(ec == error::not_held);
        zkasio::error_code redirected;
        co_await none.async_guarded_multi({}, asio::redirect_error(asio::use_awaitable, redirected));
        CHECK(redirected == error::not_held);
        // The default token: co_await.
        auto [released] = co_await none.async_release(asio::experimental::as_tuple(asio::use_awaitable));
        CHECK(released == error::not_held);
      },
      asio::detached);
  settle(io);
}

TEST_CASE("parallel_group over deferred operations") {
  asio::io_context io;
  lock none;
  std::optional<zkasio::error_code> first, second;
  asio::experimental::make_parallel_group(none.async_release(asio::experimental::deferred),
                                          none.async_wait_lost(asio::experimental::deferred))
      .async_wait(asio::experimental::wait_for_all(),
                  asio::bind_executor(io, [&](std::array<std::size_t, 2>, zkasio::error_code a, zkasio::error_code b) {
                    first = a;
                    second = b;
                  }));
  settle(io);
  CHECK(first == error::not_held);
  CHECK(second == error::not_held);
}

TEST_CASE("an acquire's options as it starts: the timeout counts from the launch; with a deadline, the earlier") {
  using namespace std::chrono_literals;
  using zkasio::detail::request_of;
  using zkasio::detail::started;
  const auto kind = zkasio::detail::node_kind::lock;
  zkasio::owner me;
  const auto before = std::chrono::steady_clock::now();
  auto timed = started(request_of(kind, {.who = me, .timeout = 1h}));
  CHECK(timed.who == me);
  CHECK_FALSE(timed.timeout);
  REQUIRE(timed.deadline);
  CHECK(*timed.deadline >= before + 1h);
  const auto soon = before + 1s;
  CHECK(started(request_of(kind, {.deadline = soon, .timeout = 1h})).deadline == soon);
  const auto late = before + 10h;
  auto earlier = started(request_of(kind, {.deadline = late, .timeout = 1h}));
  REQUIRE(earlier.deadline);
  CHECK(*earlier.deadline < late);
  CHECK_FALSE(started(request_of(kind, {.who = me})).deadline);
  // A timeout too long to add to now waits for ever, rather than overflow into the past.
  CHECK(started(request_of(kind, {.timeout = std::chrono::steady_clock::duration::max()})).deadline ==
        std::chrono::steady_clock::time_point::max());
}
