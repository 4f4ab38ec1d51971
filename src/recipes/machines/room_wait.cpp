#include "recipes/machines/room_wait.hpp"

#include <zkasio/error.hpp>

#include "recipes/rules/decisions.hpp"
#include "recipes/rules/queue_rule.hpp"

namespace zkasio::detail {

room_wait::action room_wait::finish(action a) {
  stage_ = stage::finished;
  return a;
}

bool room_wait::rides_through(error_code ec, const look& now) const {
  return detail::rides_through(ec, mine_.one_look, now.generation, mine_.generation);
}

room_wait::action room_wait::start(const look& now) { return list_again(now); }

room_wait::action room_wait::list_again(const look& now) {
  if (now.mutex_lost) return finish(fail{make_error_code(error::lock_lost)});
  stage_ = stage::listing;
  return list{};
}

room_wait::action room_wait::wait_for_connection(error_code after) {
  stage_ = stage::connecting;
  return connect{after};
}

room_wait::action room_wait::resume(const event& e, const look& now) {
  switch (stage_) {
    case stage::listing:
      if (auto* l = std::get_if<listed>(&e)) return on_listed(*l, now);
      break;
    case stage::confirming:
      // (Its error is met again by the listing that follows.)
      if (std::holds_alternative<confirmed>(e)) return list_again(now);
      break;
    case stage::connecting:
      if (auto* c = std::get_if<connected>(&e)) return c->ec ? finish(fail{c->ec}) : list_again(now);
      break;
    case stage::watching:
      if (std::holds_alternative<mutex_lost>(e)) return finish(fail{make_error_code(error::lock_lost)});
      if (auto* c = std::get_if<changed>(&e)) {
        if (!c->ec) return list_again(now);
        return rides_through(c->ec, now) ? wait_for_connection(c->ec) : finish(fail{c->ec});
      }
      break;
    case stage::finished:
      break;
  }
  return finish(fail{make_error_code(error::internal_error)});
}

room_wait::action room_wait::on_listed(const listed& l, const look& now) {
  if (rides_through(l.ec, now)) return wait_for_connection(l.ec);
  if (l.ec) return finish(fail{l.ec});
  // Its leases went with the session that made them.
  if (now.generation != mine_.generation) return finish(fail{make_error_code(zk_error::session_expired)});
  switch (lease_queue.room_for(l.children, mine_.names, mine_.max)) {
    case room_verdict::missing:  // one of its leases deleted by someone else
      return finish(fail{make_error_code(error::lock_lost)});
    case room_verdict::granted:
      if (now.sure) return finish(granted{});
      if (now.never_sure) return finish(fail{now.never_sure});
      // The listing too old (session_sure): listed again once the session
      // is confirmed since now.
      stage_ = stage::confirming;
      return confirm{};
    case room_verdict::wait:
      break;
  }
  if (mine_.one_look) return finish(fail{make_error_code(error::lock_busy)});
  if (now.mutex_lost) return finish(fail{make_error_code(error::lock_lost)});
  stage_ = stage::watching;
  return watch{l.cversion};
}

}  // namespace zkasio::detail
