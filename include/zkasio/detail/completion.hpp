// How a request's outcome reaches the user's completion handler.
//
// A completion<Values...> is the type-erased end of one asynchronous
// operation. The session core completes it on its strand, at most once: from a
// C client callback, from a session event, or from cancellation. The handler
// then runs on its own associated executor (never inside the C client), with
// its associated allocator, after its cancellation slot has been cleared.
#pragma once

#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <functional>
#include <memory>
#include <system_error>
#include <tuple>
#include <utility>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

template <class... Values>
class completion {
 public:
  virtual ~completion() = default;

  bool done() const noexcept { return done_; }

  // Delivers the outcome unless one was delivered already. On the strand.
  void complete(error_code ec, Values... values) {
    if (done_) return;
    done_ = true;
    on_cancel = nullptr;
    deliver(ec, std::move(values)...);
  }

  // Completes with operation_aborted, then runs on_cancel (which withdraws
  // whatever the operation left registered, e.g. a watch). On the strand.
  void cancel() {
    if (done_) return;
    auto withdraw = std::move(on_cancel);
    complete(asio::error::operation_aborted, Values{}...);
    if (withdraw) withdraw();
  }

  // Set by the core while the operation has something to withdraw on cancellation.
  std::function<void()> on_cancel;

 private:
  virtual void deliver(error_code ec, Values... values) = 0;
  bool done_ = false;
};

template <class... Values>
using completion_ptr = std::shared_ptr<completion<Values...>>;

template <class Handler, class IoExecutor, class... Values>
class handler_completion final : public completion<Values...> {
 public:
  handler_completion(Handler&& handler, const IoExecutor& io_executor)
      : handler_(std::move(handler)),
        work_(asio::get_associated_executor(handler_, io_executor)) {}

 private:
  void deliver(error_code ec, Values... values) override {
    auto executor = work_.get_executor();
    auto allocator = asio::get_associated_allocator(handler_);
    // Posted, not dispatched: the handler must never run inside the C client;
    // and so the completions of one session reach a strand in the order the
    // replies came (zkasio::mutex relies on it: see send_create in src/recipes/engine/acquire_runner.cpp).
    asio::post(executor, asio::bind_allocator(allocator, [handler = std::move(handler_), ec,
                                                          values = std::make_tuple(std::move(
                                                              values)...)]() mutable {
                 asio::get_associated_cancellation_slot(handler).clear();
                 std::apply([&](auto&&... v) { std::move(handler)(ec, std::move(v)...); },
                            std::move(values));
               }));
    work_.reset();
  }

  Handler handler_;
  asio::executor_work_guard<asio::associated_executor_t<Handler, IoExecutor>> work_;
};

// Which cancellation types an operation honours: terminal and partial always;
// total only for operations without side effects (reads and watches).
inline constexpr asio::cancellation_type write_cancellation =
    asio::cancellation_type::terminal | asio::cancellation_type::partial;
inline constexpr asio::cancellation_type read_cancellation =
    write_cancellation | asio::cancellation_type::total;

// Makes the completion for `handler` and connects the handler's cancellation slot (if any) to it: cancellation
// is carried to the strand, where it completes the operation at once.
template <class... Values, class Handler, class IoExecutor, class Strand>
completion_ptr<Values...> make_completion(Handler&& handler, const IoExecutor& io_executor,
                                          const Strand& strand,
                                          asio::cancellation_type honoured) {
  using handler_type = std::decay_t<Handler>;
  using impl = handler_completion<handler_type, IoExecutor, Values...>;
  auto slot = asio::get_associated_cancellation_slot(handler);
  // Not with the handler's allocator: the C client's request may hold this
  // until after the handler has run, and Asio's rule is that handler memory is
  // given back before the handler runs. The handler's allocator serves the
  // posted invocation (deliver).
  completion_ptr<Values...> result =
      std::make_shared<impl>(std::forward<Handler>(handler), io_executor);
  if (slot.is_connected()) {
    slot.assign([weak = std::weak_ptr<completion<Values...>>(result), strand,
                 honoured](asio::cancellation_type type) {
      if ((type & honoured) == asio::cancellation_type::none) return;
      asio::post(strand, [weak] {
        if (auto c = weak.lock()) c->cancel();
      });
    });
  }
  return result;
}

}  // namespace zkasio::detail
