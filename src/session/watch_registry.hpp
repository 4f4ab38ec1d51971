// A session's one-shot watches. Waiters on the same path and kind share one
// watch_point, which holds at most one watch on the server (one C watcher
// object, the point itself as its context) and at most one request in
// flight. A point lives until no waiter, no C watcher object and no request
// refers to it. On the session's strand, like the session.
#pragma once

#include <zookeeper/zookeeper.h>

#include <list>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <zkasio/detail/completion.hpp>
#include <zkasio/operations.hpp>

namespace zkasio::detail {

class session_impl;

class watch_registry {
 public:
  enum class watch_kind { data, children };
  struct watch_waiter {
    completion_ptr<> deleted{};            // waits for deletion only
    completion_ptr<event_type> changed{};  // waits for any change
    completion_ptr<> created{};            // waits for the node to exist (data points)
    std::int32_t known_version = any_version;
    bool done() const { return deleted ? deleted->done() : created ? created->done() : changed->done(); }
  };

  // `session` owns the registry; the handle and the requests are its.
  explicit watch_registry(session_impl& session) : session_(session) {}
  watch_registry(const watch_registry&) = delete;
  watch_registry& operator=(const watch_registry&) = delete;

  // A waiter, on the point of `kind` at `path` (set now if connected, else
  // once connected).
  void add(watch_kind kind, std::string path, watch_waiter waiter);
  // Connected: sets the watches that waiters wait for and no one set yet.
  void arm_waiting();
  // Completes every waiter with `ec` (the session expired or is closing).
  void fail_all(error_code ec);
  // The handle was closed: the C client freed its watcher objects without
  // calling them, so every point goes.
  void forget_all();

 private:
  struct watch_point {
    watch_registry* owner = nullptr;
    std::list<watch_point>::iterator self;  // in owner->points_
    std::string path;
    watch_kind kind = watch_kind::data;
    std::list<watch_waiter> waiters;
    bool indexed = true;      // found by new waiters; false once being withdrawn
    bool registered = false;  // the C client holds a watcher object for it
    bool arming = false;      // a get-with-watch request is in flight
    bool removing = false;    // a remove-watches request is in flight
    // Registered on a missing node: an exists watch (armed so while a waiter
    // waits for the node to be created), which fires at its creation.
    bool missing = false;
    node_stat last;           // the node as of the last arming reply
  };
  // A request's context is its point: a point has at most one request in
  // flight (arming, or removing) and lives until its reply (free_if_unused).
  static watch_point* point_of(const void* context) {
    return static_cast<watch_point*>(const_cast<void*>(context));
  }

  void arm(watch_point* point);
  void settle(watch_point* point, error_code ec, std::optional<event_type> event);
  void withdraw_if_idle(watch_point* point);
  void free_if_unused(watch_point* point);
  // The C client's callbacks (through the point: its context).
  void on_reply(watch_point* point, int rc, const Stat* st);
  void on_event(watch_point* point, int type);
  void on_removed(watch_point* point, int rc);
  static void node_watcher(zhandle_t*, int type, int state, const char*, void* context);

  session_impl& session_;
  std::list<watch_point> points_;
  // Keyed by a view of the point's own path (a list node: it stays put).
  std::map<std::pair<watch_kind, std::string_view>, watch_point*> index_;
};

}  // namespace zkasio::detail
