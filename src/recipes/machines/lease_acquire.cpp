#include "recipes/machines/lease_acquire.hpp"

#include "recipes/rules/decisions.hpp"

namespace zkasio::detail {

lease_acquire::action lease_acquire::finish(action a) {
  stage_ = stage::finished;
  return a;
}

lease_acquire::action lease_acquire::start(const look& now) {
  if (stage_ != stage::idle) return finish(fail{code(error::internal_error)});
  if (request_.count < 1 || request_.count > request_.max) return finish(fail{code(error::invalid_lease_count)});
  return attempt(now);
}

lease_acquire::action lease_acquire::attempt(const look& now) {
  stage_ = stage::mutex;
  made_ = 0;
  generation_ = now.generation;
  return take_mutex{};
}

lease_acquire::action lease_acquire::resume(const event& e, const look& now) {
  switch (stage_) {
    case stage::mutex:
      if (auto* m = std::get_if<mutex_taken>(&e)) {
        if (m->ec) return attempt_failed(m->ec, false, now);
        generation_ = now.generation;  // the mutex's session: its leases are made in it
        stage_ = stage::leases;
        return make_lease{0};
      }
      break;
    case stage::leases:
      if (auto* l = std::get_if<lease_made>(&e)) {
        auto ec = l->ec;
        // (The mutex, and any lease made before, went with their session;
        // so they did if it has ended by the time this answer is read, as a
        // process paused past its session's timeout reads it on waking: no
        // lease is made in the session that follows.)
        if (!ec && (l->generation != generation_ || now.generation != generation_))
          ec = code(zk_error::session_expired);
        if (ec) return attempt_failed(ec, false, now);
        if (++made_ < request_.count) return make_lease{made_};
        stage_ = stage::room;
        return wait_for_room{};
      }
      break;
    case stage::room:
      if (auto* r = std::get_if<room_ended>(&e)) return r->ec ? attempt_failed(r->ec, r->mutex_lost, now) : finish(granted{});
      break;
    case stage::idle:
    case stage::finished:
      break;
  }
  return finish(fail{code(error::internal_error)});
}

lease_acquire::action lease_acquire::attempt_failed(error_code ec, bool mutex_lost, const look& now) {
  if (mutex_lost && ec == error::lock_lost && !request_.try_once) {
    if (now.generation == generation_ && !now.expired) return attempt(now);
    ec = code(zk_error::session_expired);
  }
  if (queues_again(ec, request_.requeue_on_expiry, request_.try_once, generation_, now.generation, now.expired,
                   now.closed))
    return attempt(now);
  if (ec == error::lock_busy) return finish(fail{.ec = ec, .after_removal = true});
  return finish(fail{ec});
}

}  // namespace zkasio::detail
