// strand_latch, the engine's one-time event: a wait started after it was set
// completes at once (the event cannot fall between a check and a wait), a
// pending wait wakes when it is set, a cancelled wait is told apart.
#include <doctest/doctest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <optional>
#include <zkasio/error_code.hpp>

#include "recipes/engine/strand_latch.hpp"

using zkasio::detail::strand_latch;

namespace {

// Runs `io` until it has no more work: a wait that never completes leaves
// `result` empty instead of hanging (nothing else keeps `io` busy).
std::optional<zkasio::error_code> wait_on(asio::io_context& io, strand_latch& latch) {
  std::optional<zkasio::error_code> result;
  latch.async_wait([&](zkasio::error_code ec) { result = ec; });
  io.restart();
  io.poll();
  return result;
}

}  // namespace

TEST_CASE("a wait started after the latch was set completes at once") {
  asio::io_context io;
  strand_latch latch(io.get_executor());
  latch.set();
  auto first = wait_on(io, latch);
  REQUIRE(first);
  CHECK_FALSE(*first);
  CHECK(wait_on(io, latch));  // and every later one
  CHECK(latch.is_set());
}

TEST_CASE("a pending wait wakes when the latch is set, and only then") {
  asio::io_context io;
  strand_latch latch(io.get_executor());
  std::optional<zkasio::error_code> result;
  latch.async_wait([&](zkasio::error_code ec) { result = ec; });
  io.poll();
  CHECK_FALSE(result);
  CHECK_FALSE(latch.is_set());
  latch.set();
  latch.set();  // (once is what counts)
  io.restart();
  io.poll();
  CHECK(result);
  CHECK(latch.is_set());
}

TEST_CASE("a cancelled wait ends, the latch still unset") {
  asio::io_context io;
  strand_latch latch(io.get_executor());
  asio::cancellation_signal cancel;
  std::optional<zkasio::error_code> result;
  latch.async_wait(asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec) { result = ec; }));
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.restart();
  io.poll();
  REQUIRE(result);
  CHECK(*result == asio::error::operation_aborted);
  CHECK_FALSE(latch.is_set());
  CHECK_FALSE(wait_on(io, latch));  // a later wait waits
}
