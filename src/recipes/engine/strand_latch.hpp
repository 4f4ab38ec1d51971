// strand_latch: a one-time event that coroutines on one strand await.
//
// Why: the engine waits for things that happen in another coroutine or a
// callback (a shared listing's reply, a background delete's end, the
// semaphore's mutex lost). A timer cancelled when it happens wakes only the
// waits already pending: an event that fires while its waiter is suspended
// elsewhere (say, on a listing) would be missed, and the waiter would then
// wait for ever. Once set, a latch stays set: a wait started later completes
// at once, so no event can fall between a check and a wait.
//
// Use on one strand (not thread-safe). A wait also ends when it is cancelled
// (asio::error::operation_aborted); the waiter tells that apart by is_set().
#pragma once

#include <asio/async_result.hpp>
#include <asio/steady_timer.hpp>
#include <system_error>
#include <utility>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

class strand_latch {
 public:
  template <class Executor>
  explicit strand_latch(const Executor& executor) : timer_(executor, asio::steady_timer::time_point::max()) {}

  // Wakes the waits pending now and every later one.
  void set() {
    if (set_) return;
    set_ = true;
    timer_.expires_at(asio::steady_timer::time_point::min());  // (cancels the pending waits)
  }
  bool is_set() const { return set_; }

  // void(error_code): once set (at once if it already is), or cancelled.
  template <class Token>
  auto async_wait(Token&& token) {
    return timer_.async_wait(std::forward<Token>(token));
  }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

}  // namespace zkasio::detail
