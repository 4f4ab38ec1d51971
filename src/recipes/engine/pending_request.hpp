// pending_request: the one request a runner has pending (machine_run,
// machine_run.hpp), and what cancels it.
//
// Why a new signal after a stop: a request's completion clears the
// cancellation slot its handler was bound to when it runs (Asio's rule:
// completion.hpp's deliver), and a stopped request may complete after the
// next request was bound. Had they shared one signal, that late completion
// would unbind the next request, which a stop could then not cancel: it
// would live, and keep its runner, until the server answered it. Requests
// bound between two stops share one signal, one pending at a time: the
// next is bound once the last one's handler has run (from it, as the
// runners do). The first signal is this object's own, for as long as no
// stop leaves a request on it (the common case: no allocation); a stop that
// does moves the next requests to a signal made then. Every signal lives
// as long as this object.
//
// Use on one strand (not thread-safe). It must outlive the handlers bound
// to it: a runner's handlers keep their runner, which has it.
#pragma once

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <memory>
#include <utility>

namespace zkasio::detail {

class pending_request {
 public:
  // `f` as the pending request's handler: run on `executor`, cancelled by
  // stop(). Answered, it leaves the slot before f runs (stop() must not call
  // what belongs to a request already answered, and f may bind the next).
  template <class Executor, class F>
  auto bind(const Executor& executor, F f) {
    auto& signal = current();
    return asio::bind_cancellation_slot(
        signal.slot(), asio::bind_executor(executor, [signal = &signal, f = std::move(f)](auto&&... values) mutable {
          signal->slot().clear();
          f(std::forward<decltype(values)>(values)...);
        }));
  }

  // Cancels the request pending now (terminal). If one is, its completion
  // comes later and clears its slot: what is bound from now on is bound to
  // a new signal.
  void stop() {
    auto& signal = current();
    if (signal.slot().has_handler()) moved_ = std::make_unique<moved>(std::move(moved_));
    signal.emit(asio::cancellation_type::terminal);
  }

 private:
  // A signal made at a stop, and the ones before it (kept: their stopped
  // requests may still complete).
  struct moved {
    explicit moved(std::unique_ptr<moved> before) : before(std::move(before)) {}
    asio::cancellation_signal signal;
    std::unique_ptr<moved> before;
  };

  asio::cancellation_signal& current() { return moved_ ? moved_->signal : own_; }

  asio::cancellation_signal own_;  // until a stop leaves a request on it
  std::unique_ptr<moved> moved_;   // since then
};

}  // namespace zkasio::detail
