// One-shot watches (watch_registry.hpp).
//
// Withdrawing: the last waiter gone, a registered point sends
// remove_all_watches for its path and kind (zoo_aremove_watches would only
// remove it locally). The point leaves the index at that moment, so a later
// waiter's get-with-watch is ordered after the removal by the session's
// request order and is not removed with it. If the removal fails, the watcher
// object is removed locally, so the C client does not set it again on
// reconnection.
#include <algorithm>
#include <asio/post.hpp>

#include "watch_registry.hpp"

#include "c_types.hpp"
#include "session_impl.hpp"

namespace zkasio::detail {

namespace {

ZooWatcherType c_watch_type(watch_registry::watch_kind kind) {
  return kind == watch_registry::watch_kind::data ? ZWATCHTYPE_DATA : ZWATCHTYPE_CHILD;
}

std::int32_t version_of(const auto& point) {
  return point.kind == watch_registry::watch_kind::data ? point.last.version : point.last.cversion;
}

// What an exists' reply says of a missing node on which it set a watch
// (unlike a get's ZNONODE, after which no watch is set). Not a C client code.
constexpr int missing_watched = 1;

event_type change_of(watch_registry::watch_kind kind) {
  return kind == watch_registry::watch_kind::data ? event_type::data_changed
                                                : event_type::children_changed;
}

}  // namespace

void watch_registry::add(watch_kind kind, std::string path, watch_waiter waiter) {
  watch_point* point;
  if (auto found = index_.find(std::pair<watch_kind, std::string_view>(kind, path)); found != index_.end()) {
    point = found->second;
  } else {
    auto self = points_.emplace(points_.end());
    point = &*self;
    point->owner = this;
    point->self = self;
    point->path = std::move(path);
    point->kind = kind;
    index_.emplace(std::pair<watch_kind, std::string_view>(kind, point->path), point);
  }
  auto it = point->waiters.insert(point->waiters.end(), std::move(waiter));
  // (Two words, held inside the std::function: no allocation of its own.)
  auto withdraw = [point, it] {
    point->waiters.erase(it);
    point->owner->withdraw_if_idle(point);
  };
  if (it->deleted) it->deleted->on_cancel = withdraw;
  else if (it->created) it->created->on_cancel = withdraw;
  else it->changed->on_cancel = withdraw;

  if (point->registered) {
    // The watch is set and has not fired: the node is as the last reply said.
    if (it->changed && it->known_version != any_version && it->known_version != version_of(*point))
      it->changed->complete({}, change_of(kind));
    if (it->created && !point->missing) it->created->complete({});
    if (it->deleted && point->missing) it->deleted->complete({});
    withdraw_if_idle(point);
  } else if (!point->arming && session_.connected()) {
    arm(point);
    withdraw_if_idle(point);
  }
  // Not connected: armed once connected (on_session_event).
}

void watch_registry::arm(watch_point* point) {
  point->arming = true;
  c_client_scope scope(&session_.options());
  auto* zh = session_.handle();
  int rc;
  bool awaits_creation = std::any_of(point->waiters.begin(), point->waiters.end(),
                                     [](const watch_waiter& w) { return w.created && !w.done(); });
  if (point->kind == watch_kind::data && awaits_creation) {
    // An exists with a watch: set on a missing node too, where it fires at
    // the node's creation (a get sets none there).
    rc = zoo_awexists(
        zh, point->path.c_str(), &watch_registry::node_watcher, point,
        [](int rc, const Stat* st, const void* context) {
          auto* point = point_of(context);
          point->owner->on_reply(point, rc == ZNONODE ? missing_watched : rc, st);
        },
        point);
  } else if (point->kind == watch_kind::data) {
    rc = zoo_awget(
        zh, point->path.c_str(), &watch_registry::node_watcher, point,
        [](int rc, const char*, int, const Stat* st, const void* context) {
          auto* point = point_of(context);
          point->owner->on_reply(point, rc, st);
        },
        point);
  } else {
    rc = zoo_awget_children2(
        zh, point->path.c_str(), &watch_registry::node_watcher, point,
        [](int rc, const String_vector*, const Stat* st, const void* context) {
          auto* point = point_of(context);
          point->owner->on_reply(point, rc, st);
        },
        point);
  }
  if (rc != ZOK) {
    // The caller withdraws the point if that left it idle.
    point->arming = false;
    settle(point, session_.translate(rc), std::nullopt);
    return;
  }
  session_.after_submit();
}

void watch_registry::on_reply(watch_point* point, int rc, const Stat* st) {
  point->arming = false;
  point->missing = false;
  if (rc == ZOK) {
    point->registered = true;
    point->last = to_stat(st);
    for (auto& w : point->waiters) {
      if (w.changed && w.known_version != any_version && w.known_version != version_of(*point))
        w.changed->complete({}, change_of(point->kind));
      if (w.created) w.created->complete({});
    }
  } else if (rc == ZNONODE || rc == missing_watched) {
    // Missing. A get sets no watch on a missing node (get_data and
    // get_children); an exists does, which waits for the node's creation.
    point->registered = point->missing = rc == missing_watched;
    for (auto& w : point->waiters) {
      if (w.deleted) w.deleted->complete({});
      else if (w.created) continue;
      else if (w.known_version != any_version) w.changed->complete({}, event_type::deleted);
      else w.changed->complete(make_error_code(zk_error::no_node), event_type{});
    }
    // Still awaited, with no watch set: an exists now.
    if (!point->registered && session_.connected() &&
        std::any_of(point->waiters.begin(), point->waiters.end(), [](const watch_waiter& w) { return w.created && !w.done(); }))
      arm(point);
  } else if (lost_in_transit(rc)) {
    // Set again once connected; waiters wait on (they have no deadline of their own).
    if (session_.connected() && !point->waiters.empty()) arm(point);
  } else {
    settle(point, session_.translate(rc), std::nullopt);
  }
  withdraw_if_idle(point);
}

void watch_registry::node_watcher(zhandle_t*, int type, int, const char*, void* context) {
  if (type == ZOO_SESSION_EVENT) return;  // session state is the session watcher's business
  auto* point = static_cast<watch_point*>(context);
  point->owner->on_event(point, type);
}

void watch_registry::on_event(watch_point* point, int type) {
  point->registered = false;
  point->missing = false;
  event_type event = type == ZOO_DELETED_EVENT   ? event_type::deleted
                     : type == ZOO_CHANGED_EVENT ? event_type::data_changed
                     : type == ZOO_CHILD_EVENT   ? event_type::children_changed
                                                 : event_type::created;
  settle(point, {}, event);
  point->waiters.remove_if([](const watch_waiter& w) { return w.done(); });
  // Deletion waiters outlive a data change: set the watch again.
  if (!point->waiters.empty() && !point->arming) arm(point);
  withdraw_if_idle(point);
}

void watch_registry::settle(watch_point* point, error_code ec, std::optional<event_type> event) {
  for (auto& w : point->waiters) {
    if (w.deleted) {
      if (ec || event == event_type::deleted) w.deleted->complete(ec);
    } else if (w.created) {
      if (ec || event == event_type::created) w.created->complete(ec);
    } else {
      w.changed->complete(ec, event.value_or(event_type{}));
    }
  }
}

void watch_registry::withdraw_if_idle(watch_point* point) {
  point->waiters.remove_if([](const watch_waiter& w) { return w.done(); });
  if (!point->waiters.empty() || point->arming || point->removing) return;
  if (point->indexed) {
    index_.erase(std::pair<watch_kind, std::string_view>(point->kind, point->path));
    point->indexed = false;
  }
  if (auto* zh = session_.handle(); point->registered && zh) {
    point->removing = true;
    c_client_scope scope(&session_.options());
    void_completion_t removed = [](int rc, const void* context) {
      auto* point = point_of(context);
      point->owner->on_removed(point, rc);
    };
    // The 3.8 header declares a pointer to the completion, but the client uses
    // the pointer as the completion itself.
    int rc = zoo_aremove_all_watches(zh, point->path.c_str(), c_watch_type(point->kind), 0,
                                     reinterpret_cast<void_completion_t*>(removed), point);
    if (rc == ZOK) {
      session_.after_submit();
      return;
    }
    point->removing = false;
    on_removed(point, rc);
    return;
  }
  free_if_unused(point);
}

void watch_registry::on_removed(watch_point* point, int rc) {
  point->removing = false;
  if (rc == ZOK) {
    point->registered = false;  // the C client dropped its watcher objects for the path
  } else if (auto* zh = session_.handle(); point->registered && zh) {
    zoo_aremove_watches(zh, point->path.c_str(), c_watch_type(point->kind),
                        &watch_registry::node_watcher, point, 1, nullptr, nullptr);
    point->registered = false;
  }
  free_if_unused(point);
}

void watch_registry::free_if_unused(watch_point* point) {
  if (point->indexed || point->registered || point->arming || point->removing ||
      !point->waiters.empty())
    return;
  points_.erase(point->self);
}

void watch_registry::fail_all(error_code ec) {
  for (auto& point : points_) {
    settle(&point, ec, std::nullopt);
    point.waiters.clear();
  }
}

void watch_registry::arm_waiting() {
  std::vector<watch_point*> unarmed;
  for (auto& point : points_)
    if (point.indexed && !point.waiters.empty() && !point.registered && !point.arming) unarmed.push_back(&point);
  for (auto* point : unarmed) arm(point);
  for (auto* point : unarmed) withdraw_if_idle(point);
}

void watch_registry::forget_all() {
  index_.clear();
  points_.clear();
}

}  // namespace zkasio::detail
