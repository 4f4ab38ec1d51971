// pending_request: the one request a runner has pending (machine_run,
// machine_run.hpp), and what cancels it.
//
// Why a new signal at each stop: a request's completion clears the
// cancellation slot its handler was bound to when it runs (Asio's rule:
// completion.hpp's deliver), and a stopped request may complete after the
// next request was bound. Had they shared one signal, that late completion
// would unbind the next request, which a stop could then not cancel: it
// would live, and keep its runner, until the server answered it. Requests
// bound between two stops share one signal, one pending at a time: the
// next is bound once the last one's handler has run (from it, as the
// runners do). Each handler keeps its signal alive.
//
// Use on one strand (not thread-safe).
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
    return asio::bind_cancellation_slot(
        signal_->slot(), asio::bind_executor(executor, [signal = signal_, f = std::move(f)](auto&&... values) mutable {
          signal->slot().clear();
          f(std::forward<decltype(values)>(values)...);
        }));
  }

  // Cancels the request pending now (terminal); what is bound from now on
  // is bound to a new signal.
  void stop() {
    auto stopped = std::exchange(signal_, std::make_shared<asio::cancellation_signal>());
    stopped->emit(asio::cancellation_type::terminal);
  }

 private:
  std::shared_ptr<asio::cancellation_signal> signal_ = std::make_shared<asio::cancellation_signal>();
};

}  // namespace zkasio::detail
