// pending_request, the runners' pending request: a stop cancels the request
// pending then, and also the next one after a stopped request completed
// late (which clears the slot it was bound to); also a timer's wait and a
// coroutine, as the runners bind them.
#include <doctest/doctest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <zkasio/detail/completion.hpp>

#include "recipes/engine/pending_request.hpp"

using zkasio::detail::completion_ptr;
using zkasio::detail::make_completion;
using zkasio::detail::pending_request;
using zkasio::detail::read_cancellation;

namespace {

// A request as the session makes one: its handler bound by `pending`,
// cancellable through the handler's slot; `answer` records how it ended.
completion_ptr<> send(asio::io_context& io, pending_request& pending, std::optional<zkasio::error_code>& answer) {
  auto ex = io.get_executor();
  return make_completion<>(pending.bind(ex, [&answer](zkasio::error_code ec) { answer = ec; }), ex, ex,
                           read_cancellation);
}

// Runs what is ready, the handlers that this posts included.
void settle(asio::io_context& io) {
  io.restart();
  io.poll();
}

// Whether `answer` says operation_aborted after a stop and what it posted.
bool stopped(asio::io_context& io, pending_request& pending, const std::optional<zkasio::error_code>& answer) {
  pending.stop();
  settle(io);
  return answer == asio::error::operation_aborted;
}

}  // namespace

TEST_CASE("a stop cancels the pending request") {
  asio::io_context io;
  pending_request pending;
  std::optional<zkasio::error_code> answer;
  auto request = send(io, pending, answer);
  CHECK(stopped(io, pending, answer));
}

TEST_CASE("the next request is cancellable whatever became of the one before: answered, or stopped and completed after the next was sent") {
  asio::io_context io;
  pending_request pending;
  std::optional<zkasio::error_code> first, second;
  auto one = send(io, pending, first);
  SUBCASE("the first answered") {  // (the next is sent by its handler, as a runner does)
    one->complete({});
    settle(io);
  }
  // The stop's cancellation of the first reaches the strand later; the next
  // request is bound before it does.
  SUBCASE("the first completes by its cancellation") {
    pending.stop();
  }
  SUBCASE("the first completes by its answer") {
    pending.stop();
    one->complete({});
  }
  auto two = send(io, pending, second);
  settle(io);
  REQUIRE(first);
  CHECK_FALSE(second);
  CHECK(stopped(io, pending, second));
}

TEST_CASE("a stop ends a timer's wait at once (the busy pause), and its handler keeps the timer") {
  asio::io_context io;
  pending_request pending;
  std::optional<zkasio::error_code> answer;
  {
    auto pause = std::make_shared<asio::steady_timer>(io, std::chrono::hours(1));
    pause->async_wait(pending.bind(io.get_executor(), [pause, &answer](zkasio::error_code ec) { answer = ec; }));
  }
  CHECK(stopped(io, pending, answer));
}

TEST_CASE("a stopped coroutine (machine_run::spawn) that ends after the next request was bound") {
  asio::io_context io;
  pending_request pending;
  std::optional<zkasio::error_code> spawned, second;
  auto work = [&io]() -> asio::awaitable<void> {
    asio::steady_timer timer(io, std::chrono::hours(1));
    co_await timer.async_wait(asio::use_awaitable);
    co_await timer.async_wait(asio::use_awaitable);
  };
  asio::co_spawn(io, work(), pending.bind(io.get_executor(), [&spawned](std::exception_ptr e) {
                   spawned = e ? asio::error::operation_aborted : zkasio::error_code{};
                 }));
  settle(io);  // suspended on its first wait
  CHECK_FALSE(spawned);
  pending.stop();
  auto two = send(io, pending, second);
  settle(io);
  CHECK(spawned == asio::error::operation_aborted);
  CHECK_FALSE(second);
  CHECK(stopped(io, pending, second));
}
