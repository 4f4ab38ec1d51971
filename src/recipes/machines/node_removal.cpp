#include "recipes/machines/node_removal.hpp"

#include <zkasio/error.hpp>

#include "recipes/rules/decisions.hpp"

namespace zkasio::detail {

namespace {

// Answers that mean the node's session is over: its nodes are gone, or (a
// session closed, or whose authentication failed) go when it expires.
bool session_gone(error_code ec) {
  return ec == zk_error::session_expired || ec == error::session_closed || ec == zk_error::auth_failed;
}

}  // namespace

node_removal::action node_removal::finish(error_code ec, bool forget) {
  stage_ = stage::finished;
  return done{ec, forget};
}

node_removal::action node_removal::start(const look& now) {
  unanswered_delete_ = false;
  if (target_.find_first) return find({});
  return attempt(now);
}

// ------------------------------------------------------------ finding first

node_removal::action node_removal::find(error_code after) {
  stage_ = stage::find_connect;
  return connect{after};
}

// A node whose create's outcome is unknown is looked for in its own session
// only: once that is over (an expiry's answer, or any answer read in a
// later session), so is the node, and there is nothing to delete.
std::optional<node_removal::action> node_removal::went_with_session(error_code ec, const look& now) {
  if (ec == zk_error::session_expired || now.generation != target_.generation) return finish({});
  return std::nullopt;
}

node_removal::action node_removal::on_synced(error_code ec, const look& now) {
  if (auto over = went_with_session(ec, now)) return *over;
  if (rides_through(ec, false, now.generation, target_.generation)) return find(ec);
  if (ec && ec != zk_error::no_node) return finish(ec);
  stage_ = stage::find_look;
  return look_up{};
}

node_removal::action node_removal::on_found(const looked_up& l, const look& now) {
  if (auto over = went_with_session(l.ec, now)) return *over;
  if (rides_through(l.ec, false, now.generation, target_.generation)) return find(l.ec);
  if (l.ec) return finish(l.ec);
  if (!l.stat || l.stat->ephemeral_owner != target_.owner) return finish({});  // never made, or gone
  if (target_.czxid == 0) target_.czxid = l.stat->czxid;
  // (Just looked up, in this session: deleted without another look.)
  stage_ = stage::removing;
  return remove{};
}

// ----------------------------------------------------------------- deleting

node_removal::action node_removal::attempt(const look& now) {
  // A later ZooKeeper session: the node went with its own (and a delete
  // sent now could remove another session's node at the path).
  if (now.session_id != target_.owner || now.generation != target_.generation)
    return finish(code(error::lock_lost), true);
  if (target_.race) {
    stage_ = stage::own_look;
    return look_up{};
  }
  stage_ = stage::removing;
  return remove{};
}

node_removal::action node_removal::on_own(const looked_up& l, const look& now) {
  if (l.ec) return after(l.ec);
  // Read in a later session, the answer says nothing more: the session's
  // end decides (its node went with it).
  if (now.generation != target_.generation) return attempt(now);
  // Another's now, or another incarnation: not this session's to delete;
  // after a delete whose answer was lost, that delete took effect.
  if (!l.stat || l.stat->ephemeral_owner != target_.owner || (target_.czxid != 0 && l.stat->czxid != target_.czxid))
    return finish(unanswered_delete_ ? error_code{} : code(error::lock_lost));
  stage_ = stage::removing;
  return remove{};
}

node_removal::action node_removal::after(error_code ec) {
  // (Closed while disconnected, a session's nodes live until it expires.)
  bool forget = !ec || ec == zk_error::no_node || ec == zk_error::session_expired;
  // Gone at a retry: the delete whose answer was lost took effect.
  if (!ec || (ec == zk_error::no_node && unanswered_delete_)) return finish({}, forget);
  if (ec == zk_error::no_node || session_gone(ec)) return finish(code(error::lock_lost), forget);
  if (ec != condition::retryable) return finish(ec, forget);
  if (stage_ == stage::removing) unanswered_delete_ = true;
  stage_ = stage::connecting;
  return connect{ec};
}

node_removal::action node_removal::on_connected(error_code ec, const look& now) {
  if (stage_ == stage::find_connect) {
    if (auto over = went_with_session(ec, now)) return *over;
    if (ec) return finish(ec);
    stage_ = stage::find_sync;
    return sync{};
  }
  if (ec) return finish(code(error::lock_lost), ec == zk_error::session_expired);
  return attempt(now);
}

node_removal::action node_removal::resume(const event& e, const look& now) {
  switch (stage_) {
    case stage::find_connect:
    case stage::connecting:
      if (auto* c = std::get_if<connected>(&e)) return on_connected(c->ec, now);
      break;
    case stage::find_sync:
      if (auto* s = std::get_if<synced>(&e)) return on_synced(s->ec, now);
      break;
    case stage::find_look:
      if (auto* l = std::get_if<looked_up>(&e)) return on_found(*l, now);
      break;
    case stage::own_look:
      if (auto* l = std::get_if<looked_up>(&e)) return on_own(*l, now);
      break;
    case stage::removing:
      if (auto* r = std::get_if<removed>(&e)) return after(r->ec);
      break;
    case stage::finished:
      break;
  }
  return finish(code(error::internal_error));
}

}  // namespace zkasio::detail
