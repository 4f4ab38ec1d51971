// What the runners of the acquire's state machines share (the fair queue's
// contender_run, acquire_runner.cpp; the race recipes' race_run.hpp; the
// semaphore's lease_op, engine_leases.cpp):
// - machine_run: the one pending request of an attempt (pending_request.hpp),
//   its reply bound to the engine's strand and fed back in as an event, and
//   dropped once the attempt is over or stopped. `Run` (CRTP) has
//   `bool running() const` (an attempt goes on) and `void resume(event)`;
//   `runs_` counts its attempts and stops.
// - arm_stops: what stops an operation from outside (the caller's
//   cancellation, the deadline).
// - after_removal: a failure reported once the failed attempt's nodes are gone.
#pragma once

#include <memory>
#include <optional>
#include <system_error>
#include <vector>
#include <zkasio/detail/completion.hpp>
#include <zkasio/error_code.hpp>

#include "recipes/engine/engine.hpp"
#include "recipes/engine/engine_acquire.hpp"
#include "recipes/engine/pending_request.hpp"

namespace zkasio::detail {

template <class Run>
class machine_run : public std::enable_shared_from_this<Run> {
 protected:
  explicit machine_run(std::shared_ptr<engine_state> m) : m_(std::move(m)) {}

  // A handler of this attempt: on the strand, calling f(run, values...)
  // unless the attempt is over (stopped, or ended while it waited).
  template <class F>
  auto current(F f) {
    return asio::bind_executor(m_->strand, [self = run().shared_from_this(), at = runs_,
                                            f = std::move(f)](auto&&... values) mutable {
      if (at == self->runs_ && self->running()) f(*self, std::forward<decltype(values)>(values)...);
    });
  }
  // The same for the pending request, cancelled by stop_pending().
  template <class F>
  auto on_strand(F f) {
    return pending_.bind(m_->strand, current(std::move(f)));
  }
  // A reply's handler: fed back in as make_event(values...).
  template <class MakeEvent>
  auto reply(MakeEvent make_event) {
    return on_strand([make_event = std::move(make_event)](Run& self, auto&&... values) mutable {
      self.resume(make_event(std::forward<decltype(values)>(values)...));
    });
  }
  // A coroutine's answer (its error) as the pending request's: fed back in
  // as make_event(error).
  template <class MakeEvent>
  void spawn(awaitable<error_code> work, MakeEvent make_event) {
    asio::co_spawn(m_->strand, std::move(work),
                   reply([make_event = std::move(make_event)](std::exception_ptr e, error_code ec) {
                     return make_event(e ? code_of(e) : ec);
                   }));
  }
  // Once it may ask again: connected, after a pause when the server said it
  // was busy (see busy_backoff.hpp); fed back in as connected(error).
  template <class MakeEvent>
  void connect(error_code after, MakeEvent connected) {
    if (!busy_answer(after)) return m_->s.async_connect(reply(connected));
    // (The pause is the pending request: a stop ends it at once. Its
    // handler keeps the timer until it has left the slot.)
    auto pause = std::make_shared<asio::steady_timer>(m_->strand, m_->busy.next(std::chrono::steady_clock::now()));
    pause->async_wait(on_strand([pause, connected](Run& self, error_code ec) {
      if (ec) return self.resume(connected(ec));
      self.m_->s.async_connect(self.reply(connected));
    }));
  }
  // The pending request cancelled, and whatever answers it dropped.
  void stop_pending() {
    ++runs_;
    pending_.stop();
  }

  std::shared_ptr<engine_state> m_;
  pending_request pending_;
  std::uint32_t runs_ = 0;             // counts attempts, and stops: replies of another are dropped

 private:
  Run& run() { return static_cast<Run&>(*this); }
};


// What stops an operation from outside: the caller's cancellation of `done`
// (terminal, partial: operation_aborted) and the deadline (deadline_passed),
// each calling stop(error) on the strand. Returns the deadline's timer, to
// cancel once the operation completes (null without a deadline).
template <class Stop, class... Values>
std::unique_ptr<asio::steady_timer> arm_stops(const std::shared_ptr<engine_state>& m, completion<Values...>& done,
                                              std::optional<std::chrono::steady_clock::time_point> deadline, Stop stop) {
  // (The caller's cancellation has completed the operation when this runs:
  // what is left goes.)
  done.on_cancel = [stop] { stop(asio::error::operation_aborted); };
  if (!deadline) return nullptr;
  auto timer = std::make_unique<asio::steady_timer>(m->strand, *deadline);
  timer->async_wait([m, stop](error_code ec) {
    if (!ec) stop(deadline_passed(m->s));
  });
  return timer;
}

// Calls then(ec) on the strand once `removing` is done (after lock_busy,
// nothing is left by the time it reports); then(operation_aborted) if that
// wait was cancelled (they go on).
template <class Then>
void after_removal(const std::shared_ptr<engine_state>& m, std::vector<background<error_code>> removing,
                   error_code ec, Then then) {
  asio::co_spawn(m->strand, removed_then(std::move(removing), ec),
                 [then = std::move(then)](std::exception_ptr e, error_code ec) mutable {
                   then(e ? code_of(e) : ec);
                 });
}

}  // namespace zkasio::detail
