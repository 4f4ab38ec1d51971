#include "recipes/machines/fair_acquire.hpp"

#include <algorithm>
#include <utility>
#include <zkasio/error.hpp>

#include "recipes/rules/decisions.hpp"

namespace zkasio::detail {

namespace {

// (Overloads of a visit: one lambda per event.)
template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;


}  // namespace

bool fair_acquire::rides_through(error_code ec, const acquire_world& world) const {
  return detail::rides_through(ec, c_.one_look, world.generation(), generation_);
}

std::optional<fair_acquire::action> fair_acquire::ended_with_session(const acquire_world& world) {
  if (world.generation() == generation_) return std::nullopt;
  return failed(code(zk_error::session_expired));
}

fair_acquire::action fair_acquire::finish(action a) {
  stage_ = stage::finished;
  own_ = own_watch::none;
  return a;
}

fair_acquire::action fair_acquire::start(acquire_world& world) {
  if (world.connected()) return create(world);
  // A try is one look: no wait for a server (one ended for good says why,
  // by the connect's error).
  if (c_.one_look && world.awaiting_server()) return failed(code(error::not_connected));
  stage_ = stage::connecting;
  return connect{};
}

fair_acquire::action fair_acquire::create(acquire_world& world) {
  generation_ = world.generation();
  submitted_ = true;
  stage_ = stage::creating;
  return create_and_list{};
}

fair_acquire::action fair_acquire::resume(event e, acquire_world& world) {
  if (std::holds_alternative<own_checked>(e) || std::holds_alternative<own_gone>(e)) return on_own(e, world);
  auto broken = [&](const auto&) { return failed(code(error::internal_error)); };
  switch (stage_) {
    case stage::connecting:
      return std::visit(overloaded{[&](const connected& c) { return c.ec ? failed(c.ec) : create(world); }, broken},
                        e);
    case stage::creating:
      return std::visit(overloaded{[&](created_and_listed& c) { return on_created(std::move(c), world); }, broken}, e);
    case stage::parents:
      return std::visit(overloaded{[&](const parents_made& p) -> action {
                                     if (!p.ec) return create(world);
                                     if (!rides_through(p.ec, world)) return failed(p.ec);
                                     stage_ = stage::parents_retry;
                                     return connect{p.ec};
                                   },
                                   broken},
                        e);
    case stage::parents_retry:
      return std::visit(overloaded{[&](const connected& c) -> action {
                                     if (c.ec) return failed(c.ec);
                                     if (auto ended = ended_with_session(world)) return *ended;
                                     return create(world);
                                   },
                                   broken},
                        e);
    case stage::finding_connect:
      return std::visit(overloaded{[&](const connected& c) -> action {
                                     if (c.ec) return failed(c.ec);
                                     if (auto ended = ended_with_session(world)) return *ended;
                                     // Maybe another server now: it must have seen the
                                     // create, if the leader applied it, before it is asked.
                                     stage_ = stage::finding_sync;
                                     return sync{};
                                   },
                                   broken},
                        e);
    case stage::finding_sync:
      return std::visit(overloaded{[&](const synced& s) -> action {
                                     if (rides_through(s.ec, world)) return find(s.ec);
                                     if (s.ec && s.ec != zk_error::no_node) return failed(s.ec);
                                     stage_ = stage::finding_list;
                                     return list{};
                                   },
                                   broken},
                        e);
    case stage::finding_list:
      return std::visit(overloaded{[&](const listed& l) -> action {
                                     // (A listing answered in a later session would not show the node either.)
                                     if (auto ended = ended_with_session(world)) return *ended;
                                     if (rides_through(l.ec, world)) return find(l.ec);
                                     if (l.ec == zk_error::no_node) return create(world);  // the parent went: so did the node
                                     if (l.ec) return failed(l.ec);
                                     auto found = find_by_uuid(l.view->nodes, c_.uuid);
                                     if (!found) return create(world);
                                     found_in_ = l.view;
                                     found_at_ = static_cast<std::size_t>(found - l.view->nodes.data());
                                     stage_ = stage::finding_look;
                                     return look_up{found->name};
                                   },
                                   broken},
                        e);
    case stage::finding_look:
      return std::visit(overloaded{[&](const looked_up& l) { return on_found(l, world); }, broken}, e);
    case stage::relist_connect:
      return std::visit(overloaded{[&](const connected& c) -> action {
                                     if (c.ec) return failed(c.ec);
                                     stage_ = stage::relisting;
                                     return list{};
                                   },
                                   broken},
                        e);
    case stage::relisting:
      return std::visit(overloaded{[&](const listed& l) { return decide_on(l.ec, l.view, world); }, broken}, e);
    case stage::waiting:
      return std::visit(overloaded{[&](const gone& g) { return on_gone(g.ec, world); }, broken}, e);
    case stage::verifying:
      return std::visit(overloaded{[&](const looked_up& l) -> action {
                                     // (Answered in a session that has ended since: its
                                     // node went with it, not lost to an operator.)
                                     if (auto ended = ended_with_session(world)) return *ended;
                                     if (rides_through(l.ec, world)) return relist(l.ec);
                                     if (l.ec) return failed(l.ec);
                                     // An operator may have deleted it while it waited; an
                                     // election's candidate checks whose it is.
                                     bool there = l.stat && l.stat->ephemeral_owner == stat_.ephemeral_owner &&
                                                  l.stat->ephemeral_owner == world.session_id();
                                     if (!there) {
                                       gone_ = true;
                                       world.gone(node_.name);
                                       return failed(code(error::lock_lost));
                                     }
                                     return after_verify(world);
                                   },
                                   broken},
                        e);
    case stage::downgrade_sync:
      return std::visit(overloaded{[&](const synced& s) -> action {
                                     if (rides_through(s.ec, world)) return relist(s.ec);
                                     if (s.ec) return failed(s.ec);
                                     stage_ = stage::downgrade_look;
                                     return list{};
                                   },
                                   broken},
                        e);
    case stage::downgrade_look:
      return std::visit(overloaded{[&](const listed& l) -> action {
                                     if (auto ended = ended_with_session(world)) return *ended;
                                     if (rides_through(l.ec, world)) return relist(l.ec);
                                     if (l.ec) return failed(l.ec);
                                     // Both its nodes listed after the sync, in its session
                                     // (names of its uuid): the write node still there, and
                                     // its own, which an operator may have deleted since
                                     // the listing it was decided on.
                                     auto listed_here = [&](const std::string& name) {
                                       return l.view && std::any_of(l.view->nodes.begin(), l.view->nodes.end(),
                                                                    [&](const lock_node& n) { return n.name == name; });
                                     };
                                     if (!listed_here(node_.name)) {
                                       gone_ = true;
                                       world.gone(node_.name);
                                       return failed(code(error::lock_lost));
                                     }
                                     if (!listed_here(*c_.downgrade_of)) return failed(code(error::lock_lost));
                                     return after_downgrade(world);
                                   },
                                   broken},
                        e);
    case stage::sure_confirm:
      // Decided on replies too old to be sure of the session: look again
      // once it is confirmed (an error, if any, the listing meets again).
      return std::visit(overloaded{[&](const confirmed& c) { return relist(c.ec); }, broken}, e);
    case stage::finished:
      break;
  }
  return failed(code(error::internal_error));
}

fair_acquire::action fair_acquire::on_created(created_and_listed&& e, acquire_world& world) {
  if (!e.replied) {
    // The listing ended before the create's reply. Cut off, in its session:
    // the create waits for the connection with no deadline of its own, where
    // the listing had read_retry_timeout; it may still go, or have gone, so
    // the node is found by its uuid once connected, as after a lost reply
    // (a disconnection the session survives costs the acquire nothing).
    // Else (refused at once, or the order relied on broke) the runner
    // deletes by uuid.
    if (e.list_ec && rides_through(e.list_ec, world)) return find(e.list_ec);
    return failed(e.list_ec ? e.list_ec : code(error::internal_error));
  }
  node_ = std::move(e.node);
  stat_ = e.stat;
  if (!e.create_ec) {
    if (c_.create_only) {
      // Its node is there; a listing cut off is no matter (the caller lists).
      if (e.list_ec && !rides_through(e.list_ec, world)) return failed(e.list_ec);
      return finish(grant{});
    }
    if (e.list_ec && !c_.one_look) return relist(e.list_ec);
    return decide_on(e.list_ec, e.view, world);
  }
  // No parent: made as containers, which the server may remove again once
  // empty, so more than once, but not for ever.
  if (e.create_ec == zk_error::no_node && parents_made_++ < 3) {
    stage_ = stage::parents;
    return make_parents{};
  }
  // A connection lost before the reply: the create may have been applied.
  if (e.create_ec != condition::retryable || c_.one_look) return failed(e.create_ec);
  return find(e.create_ec);
}

fair_acquire::action fair_acquire::find(error_code after) {
  stage_ = stage::finding_connect;
  return connect{after};
}

fair_acquire::action fair_acquire::on_found(const looked_up& l, acquire_world& world) {
  auto view = std::exchange(found_in_, nullptr);
  if (auto ended = ended_with_session(world)) return *ended;
  if (rides_through(l.ec, world)) return find(l.ec);
  if (l.ec) return failed(l.ec);
  if (!l.stat || l.stat->ephemeral_owner != world.session_id()) return create(world);  // not ours: create again
  auto mine = found_at_;
  node_ = view->nodes[mine];
  stat_ = *l.stat;
  world.add(node_, generation_, exempt());
  // The listing was made before the contenders it answers knew their nodes:
  // its part up to mine (all a decision reads) is made again with what is
  // known now, lest nodes before mine that this process knows make me list
  // again once my predecessor goes.
  if (view->before[mine].others > 0)
    view = world.view(std::vector<lock_node>(view->nodes.begin(),
                                             view->nodes.begin() + static_cast<std::ptrdiff_t>(mine) + 1));
  if (c_.create_only) return finish(grant{});
  return decide_on({}, std::move(view), world);
}

fair_acquire::action fair_acquire::relist(error_code after) {
  own_ = own_watch::none;
  stage_ = stage::relist_connect;
  return connect{after};
}

fair_acquire::action fair_acquire::decide_on(error_code ec, std::shared_ptr<const queue_view> view,
                                             acquire_world& world) {
  if (rides_through(ec, world) && !node_.name.empty()) return relist(ec);
  if (ec) return failed(ec);
  if (auto ended = ended_with_session(world)) return *ended;
  if (!unsure_below_.empty()) {
    bool shown = std::any_of(view->nodes.begin(), view->nodes.end(),
                             [&](const lock_node& n) { return n.name == unsure_below_; });
    if (!shown) world.gone(unsure_below_);
    unsure_below_.clear();
  }
  auto verdict = decide(*view, node_, exempt());
  view.reset();  // a waiter keeps no listing: there may be thousands of both
  switch (verdict.what) {
    case lock_verdict::missing:
      gone_ = true;
      world.gone(node_.name);
      return failed(code(error::lock_lost));
    case lock_verdict::wait:
      if (c_.one_look) return failed(code(error::lock_busy));
      relist_after_ = verdict.relist_after;
      return wait_for(std::move(verdict.predecessor), world);
    case lock_verdict::held:
      break;
  }
  // First by a listing: checked only if a candidate must confirm its owner.
  return check(c_.confirm_owner, world);
}

fair_acquire::action fair_acquire::wait_for(std::string predecessor, acquire_world& world) {
  predecessor_ = std::move(predecessor);
  predecessor_here_ = world.here(predecessor_, generation_);
  stage_ = stage::waiting;
  bool watch_own = !predecessor_here_ && own_ == own_watch::none;
  if (watch_own) {
    own_ = own_watch::asked;
    own_connection_ = world.connection();
  }
  return wait_gone{predecessor_, predecessor_here_, watch_own};
}

fair_acquire::action fair_acquire::on_own(const event& e, acquire_world& world) {
  // Out of the wait it asked for (or of a later wait's: a stale answer is
  // its runner's to drop), it changes nothing.
  if (stage_ != stage::waiting || own_ == own_watch::none) return keep_waiting{};
  if (auto* checked = std::get_if<own_checked>(&e)) {
    if (own_ != own_watch::asked) return keep_waiting{};
    if (checked->ec) {  // (no matter: it is checked before the grant)
      own_ = own_watch::none;
      return keep_waiting{};
    }
    const auto& st = checked->stat;
    if (st && st->czxid == stat_.czxid && st->ephemeral_owner == stat_.ephemeral_owner &&
        st->ephemeral_owner == world.session_id()) {
      // Sure in the connection it was asked in, if that is still the one:
      // an answer read after a reconnection (its completion ran late) may
      // have come on the connection before, and the events after the
      // reconnection come in no order of the changes.
      own_ = own_connection_ == world.connection() ? own_watch::sure : own_watch::none;
      return keep_waiting{};
    }
  } else if (std::get<own_gone>(e).ec) {  // the watch failed: checked before the grant
    own_ = own_watch::none;
    return keep_waiting{};
  }
  // Gone while it waited (an operator): lock_lost, known gone.
  gone_ = true;
  world.gone(node_.name);
  return failed(code(error::lock_lost));
}

fair_acquire::action fair_acquire::on_gone(error_code ec, acquire_world& world) {
  // Its own node's watch speaks for the node if it has been sure, in this
  // connection, since before this event, which came on the same connection
  // (a server watch's). A wake-up in this process may come from another
  // session's watch, or while this one is cut off: not ordered with its
  // own node's deletion.
  bool own_sure = !predecessor_here_ && own_ == own_watch::sure && own_connection_ == world.connection();
  if (!ec && !predecessor_here_) world.gone(predecessor_);  // (seen by the server's watch)
  if (!ec && world.generation() != generation_) ec = code(zk_error::session_expired);
  if (ec) return rides_through(ec, world) ? relist(ec) : failed(ec);
  if (relist_after_) return relist({});
  // Only known nodes were below: which of them may still be there is known.
  auto next = world.below(node_, exempt());
  switch (next.what) {
    // Mine may be gone too: checked, unless its watch was sure (its
    // deletion would have come first).
    case acquire_world::below_result::first: return check(!own_sure, world);
    case acquire_world::below_result::relist:
      unsure_below_ = std::move(next.name);
      return relist({});
    case acquire_world::below_result::node: break;
  }
  return wait_for(std::move(next.name), world);
}

fair_acquire::action fair_acquire::check(bool verify, acquire_world& world) {
  own_ = own_watch::none;
  if (verify) {
    stage_ = stage::verifying;
    return look_up{node_.name};
  }
  return after_verify(world);
}

fair_acquire::action fair_acquire::after_verify(acquire_world& world) {
  if (!c_.downgrade_of) return after_downgrade(world);
  // A downgrade is granted only if its write node is still there once the
  // read node is known: a writer of this process that saw the write node go
  // before would not have seen the read node (asked after a sync: the
  // server answering may lag behind the leader). One listing says it, and
  // that its own node is still there too.
  stage_ = stage::downgrade_sync;
  return sync{};
}

fair_acquire::action fair_acquire::after_downgrade(acquire_world& world) {
  // No grant of a node of a session that has ended (an answer of it read
  // late, as a process paused past its timeout reads it on waking), nor on
  // replies too old to be sure of the session (session_sure).
  if (auto ended = ended_with_session(world)) return *ended;
  if (!world.sure()) {
    if (auto never = world.never_sure()) return failed(never);
    stage_ = stage::sure_confirm;
    return confirm{};
  }
  return finish(grant{});
}

}  // namespace zkasio::detail
