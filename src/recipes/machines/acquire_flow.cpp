#include "recipes/machines/acquire_flow.hpp"

#include "recipes/rules/decisions.hpp"

namespace zkasio::detail {

acquire_flow::action acquire_flow::finish(action a) {
  stage_ = stage::finished;
  leads_ = false;  // (granted: to its hold; else to the next waiter)
  return a;
}

acquire_flow::action acquire_flow::start(const look& now) {
  if (stage_ != stage::idle) return finish(fail{code(error::internal_error)});
  switch (request_.holds) {
    case reentry::again: return finish(granted_again{});
    case reentry::lost: return finish(fail{code(error::lock_lost)});
    // (Queueing behind its own node would wait for ever.)
    case reentry::deadlock: return finish(fail{code(error::would_deadlock)});
    case reentry::none:
    case reentry::downgrade: break;
  }
  stage_ = stage::attempting;
  if (!request_.local_run) return attempt{};
  if (!now.run_active) {
    leads_ = true;
    return attempt{};
  }
  if (request_.try_once) return finish(fail{code(error::lock_busy)});
  stage_ = stage::waiting;
  joined_ = now.generation;
  return wait_in_run{};
}

acquire_flow::action acquire_flow::resume(const event& e, const look& now) {
  if (auto* s = std::get_if<stopped>(&e)) return finished() ? action(keep_waiting{}) : finish(fail{s->ec});
  switch (stage_) {
    case stage::waiting:
      if (auto* h = std::get_if<handed>(&e)) {
        // (A lock that may be lost, or of a session that has ended: the
        // waiter leads the run in its place, as after a release.)
        if (h->lock && h->sure && h->generation == now.generation && !now.expired && !now.closed)
          return finish(take_handed{});
        leads_ = true;
        if (now.connected) return lead_taken(now);
        stage_ = stage::connecting;
        return connect{};
      }
      break;
    case stage::connecting:
      if (auto* c = std::get_if<connected>(&e)) return c->ec ? finish(fail{c->ec}) : lead_taken(now);
      break;
    case stage::attempting:
      if (auto* a = std::get_if<attempt_ended>(&e)) return attempt_ended_with(*a, now);
      break;
    case stage::finished:
      // The run's hand-over, in a tick after the acquire ended (its deadline
      // fired first, say): it goes on, or the lock object would be wedged.
      if (std::holds_alternative<handed>(e)) return pass_on{};
      // (A late reply of what was stopped.)
      return keep_waiting{};
    case stage::idle:
      break;
  }
  return finish(fail{code(error::internal_error)});
}

// Its place in the line was behind the run's node: lost if the session it
// waited in expired meanwhile (as a waiter's node goes with its session),
// unless it queues again (requeue_on_expiry).
acquire_flow::action acquire_flow::lead_taken(const look& now) {
  auto expired = code(zk_error::session_expired);
  if (now.generation != joined_ && !queues_again(expired, joined_, now)) return finish(fail{expired});
  stage_ = stage::attempting;
  return attempt{};
}

acquire_flow::action acquire_flow::attempt_ended_with(const attempt_ended& e, const look& now) {
  if (!e.ec) return finish(granted{});
  if (e.ec == error::lock_busy) return finish(fail{.ec = e.ec, .after_removal = true});
  // After an expiry: as a new attempt in the session that follows. (Not a
  // downgrade: its write node went with the session. Not a try.)
  if (!downgrade() && queues_again(e.ec, e.generation, now)) return attempt{};
  return finish(fail{e.ec});
}

bool acquire_flow::queues_again(error_code ec, std::uint64_t made_in, const look& now) const {
  return detail::queues_again(ec, request_.requeue_on_expiry, request_.try_once, made_in, now.generation, now.expired,
                              now.closed);
}

}  // namespace zkasio::detail
