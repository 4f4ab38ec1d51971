#include "recipes/machines/race_acquire.hpp"

#include <zkasio/error.hpp>

#include "recipes/rules/decisions.hpp"

namespace zkasio::detail {

std::optional<race_acquire::action> race_acquire::ended_with_session(const look& now) {
  if (now.generation == generation_) return std::nullopt;
  return failed(code(zk_error::session_expired));
}

race_acquire::action race_acquire::finish(action a) {
  stage_ = stage::finished;
  return a;
}

bool race_acquire::rides_through(error_code ec, const look& now) const {
  return detail::rides_through(ec, one_look_, now.generation, generation_);
}

race_acquire::action race_acquire::start(const look& now) {
  if (now.connected) return take_session_turn(now);
  // A try is one look: no wait for a server (one ended for good says why,
  // by the connect's error).
  if (one_look_ && now.awaiting_server) return failed(code(error::not_connected));
  stage_ = stage::connecting;
  return connect{};
}

race_acquire::action race_acquire::take_session_turn(const look& now) {
  generation_ = now.generation;
  stage_ = stage::turn;
  return take_turn{!one_look_};
}

race_acquire::action race_acquire::on_turn(const turn_taken& t, const look& now) {
  if (t.ec) return failed(t.ec);
  // The line it queued in was its session's: a later one's node is not its.
  if (auto ended = ended_with_session(now)) return *ended;
  if (!t.taken) return failed(code(error::lock_busy));
  return identify(now);
}

race_acquire::action race_acquire::identify(const look& now) {
  // (The id comes with the handshake of generation_'s session: the id read
  // in the same look as that generation is that session's.)
  if (now.session_id == 0) {
    stage_ = stage::identifying;
    return connect{};
  }
  session_id_ = now.session_id;
  return create_node(now);
}

race_acquire::action race_acquire::create_node(const look& now) {
  if (auto ended = ended_with_session(now)) return *ended;
  stage_ = stage::creating;
  return create{};
}

race_acquire::action race_acquire::on_created(const created& c, const look& now) {
  // Answered in a session that has ended since (a process paused past its
  // timeout reads the answer on waking, after the next session began): the
  // node went with it, whatever the next session's sureness says.
  if (!c.ec) {
    if (auto ended = ended_with_session(now)) return *ended;
    if (now.sure) return finish(granted{c.stat});
    return confirm_session(now);
  }
  if (c.ec == zk_error::node_exists && !checked_own_) {
    stage_ = stage::own_look;
    return look_up{};
  }
  if (c.ec == zk_error::node_exists) return others_node();
  // No parent: made as containers, which the server may remove again once
  // empty, so more than once, but not for ever.
  if (c.ec == zk_error::no_node && parents_made_++ < 3) {
    stage_ = stage::parents;
    return make_parents{};
  }
  if (c.ec != condition::retryable || one_look_) return failed(c.ec);
  return find(c.ec);  // the create may have taken effect (its reply lost)
}

// With this session's turn, a node of this session is nobody's (one whose
// delete failed, a hold's release): deleted, and created again.
race_acquire::action race_acquire::on_own(const looked_up& l, const look& now) {
  if (rides_through(l.ec, now)) {  // asked again (by a create) once connected
    stage_ = stage::own_connect;
    return connect{l.ec};
  }
  if (l.ec) return failed(l.ec);
  checked_own_ = true;
  if (l.stat && l.stat->ephemeral_owner == 0) return failed(code(zk_error::node_exists));  // waited for in vain
  if (!l.stat || l.stat->ephemeral_owner != session_id_) return others_node();
  stage_ = stage::own_removing;
  return remove_own{l.stat->ephemeral_owner, l.stat->czxid};
}

race_acquire::action race_acquire::others_node() {
  if (one_look_) return failed(code(error::lock_busy));
  stage_ = stage::watching;
  return watch{};
}

race_acquire::action race_acquire::on_gone(error_code ec, const look& now) {
  if (rides_through(ec, now)) {
    stage_ = stage::watch_connect;
    return connect{ec};
  }
  return ec ? failed(ec) : create_node(now);
}

race_acquire::action race_acquire::find(error_code after) {
  stage_ = stage::find_connect;
  return connect{after};
}

race_acquire::action race_acquire::on_found(const looked_up& l, const look& now) {
  if (rides_through(l.ec, now)) return find(l.ec);
  if (l.ec) return failed(l.ec);
  if (!l.stat || l.stat->ephemeral_owner != session_id_) return create_node(now);  // not made, or not this session's
  if (auto ended = ended_with_session(now)) return *ended;  // (as on_created)
  if (now.sure) return finish(granted{*l.stat});
  return confirm_session(now);
}

race_acquire::action race_acquire::confirm_session(const look& now) {
  if (now.never_sure) return failed(now.never_sure);
  stage_ = stage::confirming;
  return confirm{};
}

race_acquire::action race_acquire::on_connected(error_code ec, const look& now) {
  if (ec) return failed(ec);
  switch (stage_) {
    case stage::connecting:
      return take_session_turn(now);
    case stage::identifying:
      if (auto ended = ended_with_session(now)) return *ended;
      return identify(now);
    case stage::find_connect:
      if (auto ended = ended_with_session(now)) return *ended;
      // Maybe another server now: it must have seen the create, if the
      // leader applied it, before it is asked.
      stage_ = stage::find_sync;
      return sync{};
    default:  // own_connect, watch_connect: race again
      return create_node(now);
  }
}

race_acquire::action race_acquire::resume(const event& e, const look& now) {
  switch (stage_) {
    case stage::connecting:
    case stage::identifying:
    case stage::own_connect:
    case stage::watch_connect:
    case stage::find_connect:
      if (auto* c = std::get_if<connected>(&e)) return on_connected(c->ec, now);
      break;
    case stage::turn:
      if (auto* t = std::get_if<turn_taken>(&e)) return on_turn(*t, now);
      break;
    case stage::creating:
      if (auto* c = std::get_if<created>(&e)) return on_created(*c, now);
      break;
    case stage::own_look:
      if (auto* l = std::get_if<looked_up>(&e)) return on_own(*l, now);
      break;
    case stage::own_removing:
      if (auto* r = std::get_if<removed>(&e)) {
        // (Gone already: as good.)
        if (r->ec && r->ec != error::lock_lost) return failed(r->ec);
        return create_node(now);
      }
      break;
    case stage::watching:
      if (auto* g = std::get_if<gone>(&e)) return on_gone(g->ec, now);
      break;
    case stage::parents:
      if (auto* p = std::get_if<parents_made>(&e)) return p->ec ? failed(p->ec) : create_node(now);
      break;
    case stage::find_sync:
      if (auto* s = std::get_if<synced>(&e)) {
        if (rides_through(s->ec, now)) return find(s->ec);
        if (s->ec && s->ec != zk_error::no_node) return failed(s->ec);
        stage_ = stage::find_look;
        return look_up{};
      }
      break;
    case stage::find_look:
      if (auto* l = std::get_if<looked_up>(&e)) return on_found(*l, now);
      break;
    case stage::confirming:
      // (Its error, if any, the look that follows meets again.)
      if (auto* c = std::get_if<confirmed>(&e)) return find(c->ec);
      break;
    case stage::finished:
      break;
  }
  return failed(code(error::internal_error));
}

}  // namespace zkasio::detail
