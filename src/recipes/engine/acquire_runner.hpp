// The runner of fair_acquire (fair_acquire.hpp): the code that carries its
// actions out on the session and feeds the replies back in, on the engine's
// strand. A waiting acquire is this object, parked where the wake-up finds
// it (the known nodes' table, or a watch's waiters), not a chain of
// coroutine frames.
//
// start_acquire is every lock recipe's acquire (lock_engine.hpp's
// async_acquire), run here around its attempts' state machines (the fair
// queues' fair_acquire; the race recipes' race_acquire, whose runner is
// race_run.hpp): reentry by owner, the local run of a mutex with
// local_handoff, the deadline and the caller's cancellation (which stop the
// machine where it stands), the removal of a failed attempt's node (in the
// background), and queueing again in the next session after an expiry.
//
// machine_run is what the runners of the acquire's state machines share
// (the fair queue's contender_run, acquire_runner.cpp; the race recipes'
// race_run.hpp): the one pending request of an attempt, its reply bound to
// the engine's strand and fed back in as an event, and dropped once the
// attempt is over or stopped. `Run` (CRTP) has `bool running() const` (an
// attempt goes on) and `void resume(event)`; `runs_` counts its attempts
// and stops.
#pragma once

#include <memory>
#include <system_error>
#include <zkasio/detail/completion.hpp>
#include <zkasio/lock.hpp>

#include "recipes/engine/engine.hpp"
#include "recipes/engine/engine_acquire.hpp"

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
  // Answered, it leaves `pending_` (stop_pending() must not call what
  // belongs to a request already answered).
  template <class F>
  auto on_strand(F f) {
    return asio::bind_cancellation_slot(pending_.slot(), current([f = std::move(f)](Run& self, auto&&... values) mutable {
                                          self.pending_.slot().clear();
                                          f(self, std::forward<decltype(values)>(values)...);
                                        }));
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
  void spawn(awaitable<std::error_code> work, MakeEvent make_event) {
    asio::co_spawn(m_->strand, std::move(work),
                   reply([make_event = std::move(make_event)](std::exception_ptr e, std::error_code ec) {
                     return make_event(e ? code_of(e) : ec);
                   }));
  }
  // Once it may ask again: connected, after a pause when the server said it
  // was busy (see busy_backoff.hpp); fed back in as connected(error).
  template <class MakeEvent>
  void connect(std::error_code after, MakeEvent connected) {
    if (!busy_answer(after)) return m_->s.async_connect(reply(connected));
    auto pause = std::make_shared<asio::steady_timer>(m_->strand, m_->busy.next(std::chrono::steady_clock::now()));
    // (Not cancelled by a stop: a timer's handler would stay bound to the
    // slot after the timer is gone; its end is dropped, and it ends soon.)
    pause->async_wait(current([pause, connected](Run& self, std::error_code ec) {
      if (ec) return self.resume(connected(ec));
      self.m_->s.async_connect(self.reply(connected));
    }));
  }
  // The pending request cancelled, and whatever answers it dropped.
  void stop_pending() {
    ++runs_;
    pending_.emit(asio::cancellation_type::terminal);
  }

  std::shared_ptr<engine_state> m_;
  asio::cancellation_signal pending_;  // the pending request's
  std::uint32_t runs_ = 0;             // counts attempts, and stops: replies of another are dropped

 private:
  Run& run() { return static_cast<Run&>(*this); }
};


// Creates the node of `a` (a semaphore's lease: create_only) and lists the
// queue, as an acquire does, riding through a lost connection in its
// session and finding the node by its uuid after a lost reply; completes
// `done` with no error once the node is known (`a` then says which).
// Cancelled (on the strand: at once), it stops, and writes nothing more into
// `a`; whatever it may have created, `a` says (submitted, reply) for its
// removal.
void start_create_node(const std::shared_ptr<engine_state>& m, attempt& a, completion_ptr<> done);

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
  timer->async_wait([m, stop](std::error_code ec) {
    if (!ec) stop(deadline_passed(m->s));
  });
  return timer;
}

// Calls then(ec) on the strand once `removing` is done (after lock_busy,
// nothing is left by the time it reports); then(operation_aborted) if that
// wait was cancelled (they go on).
template <class Then>
void after_removal(const std::shared_ptr<engine_state>& m, std::vector<background<std::error_code>> removing,
                   std::error_code ec, Then then) {
  asio::co_spawn(m->strand, removed_then(std::move(removing), ec),
                 [then = std::move(then)](std::exception_ptr e, std::error_code ec) mutable {
                   then(e ? code_of(e) : ec);
                 });
}

}  // namespace zkasio::detail
