// Who leads, the queue as seen from outside, and revocation.
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"

namespace zkasio::detail {

namespace {

// Who leads now, and what to watch for a change: the leader's node (a
// candidate's node is never made again once gone), or the children of `dir`
// (no leader yet; or a race node, which the next holder makes again at the
// same path: its parent's cversion tells every incarnation apart).
struct leader_look {
  std::optional<leader> who;
  std::string dir;
  std::optional<std::int32_t> cversion;  // nullopt: `dir` does not exist
  std::int64_t dir_czxid = 0;            // which `dir`: one made again starts its cversion anew
};

// Completes with true as soon as the node at `path` is not the incarnation
// `czxid` (gone, or made again), else waits until cancelled (false). Sent
// just after a watch's request on the path (the session sends requests in
// the order they reach it; `||` starts its left operand first): finding
// `czxid` there means that node lived from before the watch was set until
// this answer, so the watch is on it. (A parent's children watch cannot tell
// once the parent was made again.)
awaitable<bool> other_incarnation(session& s, std::string path, std::int64_t czxid) {
  auto [ec, st] = co_await s.async_exists(path, as_tuple(use_awaitable));
  if (!ec && (!st || st->czxid != czxid)) co_return true;
  asio::steady_timer until_cancelled(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await until_cancelled.async_wait(as_tuple(use_awaitable));
  co_return false;
}

// A change of leader is a change of node (a leader's data may change: that
// is not another leader).
bool same_leader(const std::optional<leader>& a, const std::optional<leader>& b) {
  return a.has_value() == b.has_value() && (!a || (a->node == b->node && a->fencing_token == b->fencing_token));
}

awaitable<std::tuple<error_code, leader_look>> look_for_leader(std::shared_ptr<engine_state> m) {
  auto& s = m->s;
  bool race = m->family == queue_family::race;
  auto [parent, leaf] = split_path(m->path);
  leader_look look{.who = std::nullopt, .dir = race ? parent : m->path, .cversion = std::nullopt};
  for (;;) {
    auto [ec, kids] = co_await s.async_get_children(look.dir, as_tuple(use_awaitable));
    if (ec == zk_error::no_node) co_return std::make_tuple(error_code{}, look);
    if (ec) co_return std::make_tuple(ec, look);
    look.cversion = kids.stat.cversion;
    look.dir_czxid = kids.stat.czxid;
    std::optional<std::string> name;
    if (race) {
      if (std::find(kids.names.begin(), kids.names.end(), leaf) != kids.names.end()) name = "";
    } else if (auto queue = lock_queue(kids.names, m->family); !queue.empty()) {
      name = queue.front().name;
    }
    if (!name) co_return std::make_tuple(error_code{}, look);
    auto [read_ec, data] = co_await s.async_get_data(m->full(*name), as_tuple(use_awaitable));
    if (read_ec == zk_error::no_node) continue;  // it went meanwhile: look again
    if (read_ec) co_return std::make_tuple(read_ec, look);
    look.who = leader{m->full(*name), std::move(data.data), fence_token{data.stat.czxid}};
    co_return std::make_tuple(error_code{}, look);
  }
}

// True as soon as `dir` has the child `leaf` (or is gone); else waits until
// cancelled (false). Sent just after a children watch's request on `dir`
// (`||` starts its left operand first, and the session sends requests in
// the order they reach it): not there then, it is made after the watch was
// set, which fires. (The watch's own check, by cversion, misses a child
// made before it was set when the cversion did not move, as the root's did
// here.)
awaitable<bool> has_child(session& s, std::string dir, std::string leaf) {
  auto [ec, kids] = co_await s.async_get_children(dir, as_tuple(use_awaitable));
  if (ec || std::find(kids.names.begin(), kids.names.end(), leaf) != kids.names.end()) co_return true;
  asio::steady_timer until_cancelled(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await until_cancelled.async_wait(as_tuple(use_awaitable));
  co_return false;
}

// Completes once `path` may exist: at once if it does, else at the next
// change of the children of its nearest ancestor that exists (a part of the
// path made, or any other child: the caller looks again). An observer makes
// nothing: a path it made would carry its session's ACL, which may lock
// other identities out of the election.
awaitable<error_code> until_made(session& s, std::string path) {
  for (auto [dir, leaf] = split_path(path);; std::tie(dir, leaf) = split_path(dir)) {
    auto [ec, kids] = co_await s.async_get_children(dir, as_tuple(use_awaitable));
    if (ec == zk_error::no_node && dir != "/") continue;  // (under a chroot, "/" may not exist)
    if (ec || std::find(kids.names.begin(), kids.names.end(), leaf) != kids.names.end()) co_return ec;
    auto woken = co_await (s.async_wait_children_changed(dir, kids.stat.cversion, as_tuple(use_awaitable)) ||
                           has_child(s, dir, leaf));
    if (woken.index() == 1) co_return error_code{};
    auto [watch_ec, event] = std::get<0>(woken);
    co_return watch_ec == zk_error::no_node ? error_code{} : watch_ec;
  }
}

awaitable<std::tuple<error_code, std::optional<leader>>> current_leader(std::shared_ptr<engine_state> state) {
  auto [ec, look] = co_await look_for_leader(state);
  co_return std::make_tuple(ec, std::move(look.who));
}

awaitable<std::tuple<error_code, std::optional<leader>>> leader_change(std::shared_ptr<engine_state> state,
                                                                            std::optional<leader> last_seen) {
  auto& s = state->s;
  for (;;) {
    auto [ec, look] = co_await look_for_leader(state);
    if (ec || !same_leader(look.who, last_seen)) co_return std::make_tuple(ec, std::move(look.who));
    error_code wait_ec;
    if (!look.cversion) {  // no election yet: its path is where one appears
      wait_ec = co_await until_made(s, look.dir);
    } else if (look.who && state->family != queue_family::race) {
      std::tie(wait_ec) = co_await s.async_wait_deleted(look.who->node, as_tuple(use_awaitable));
    } else {
      auto changed = co_await (s.async_wait_children_changed(look.dir, *look.cversion, as_tuple(use_awaitable)) ||
                               other_incarnation(s, look.dir, look.dir_czxid));
      if (changed.index() == 0) {
        auto [watch_ec, event] = std::get<0>(changed);
        wait_ec = watch_ec == zk_error::no_node ? error_code{} : watch_ec;
      }
    }
    if (wait_ec) co_return std::make_tuple(wait_ec, std::optional<leader>{});
  }
}

awaitable<std::tuple<error_code, std::vector<contender>>> contenders(std::shared_ptr<engine_state> state) {
  auto& s = state->s;
  auto [ec, kids] = co_await s.async_get_children(state->path, as_tuple(use_awaitable));
  std::vector<contender> queue;
  if (ec) co_return std::make_tuple(ec == zk_error::no_node ? error_code{} : ec, std::move(queue));
  for (auto& node : lock_queue(kids.names, state->family)) {
    auto [read_ec, data] = co_await s.async_get_data(state->full(node.name), as_tuple(use_awaitable));
    if (read_ec == zk_error::no_node) continue;  // it went while we read
    if (read_ec) co_return std::make_tuple(read_ec, std::vector<contender>{});
    queue.push_back({state->full(node.name), static_cast<std::int32_t>(node.sequence), std::move(data.data),
                     node.kind == node_kind::read});
  }
  co_return std::make_tuple(error_code{}, std::move(queue));
}

awaitable<std::tuple<error_code>> revoke(std::shared_ptr<engine_state> state, std::string node) {
  auto dir = state->path + "/";
  if (!node.starts_with(dir) || node.size() == dir.size())
    co_return std::make_tuple(make_error_code(error::invalid_path));
  auto name = std::string_view(node).substr(dir.size());
  if (auto parsed = parse_lock_node(name); !parsed || !queue_rule::of(state->family).in_queue(parsed->kind))
    co_return std::make_tuple(make_error_code(error::not_held));
  // (Pinned to the session it was asked in, as every write of the engine.)
  auto [ec, st] = co_await state->s.pinned().async_set_data(node, revoke_message, as_tuple(use_awaitable));
  if (ec == zk_error::no_node) ec = make_error_code(error::not_held);
  co_return std::make_tuple(ec);
}

}  // namespace

void start_current_leader(const std::shared_ptr<engine_state>& engine, completion_ptr<std::optional<leader>> done) {
  start_spawned(engine->strand, current_leader(engine), std::move(done));
}

void start_leader_change(const std::shared_ptr<engine_state>& engine, std::optional<leader> last_seen,
                         completion_ptr<std::optional<leader>> done) {
  start_spawned(engine->strand, leader_change(engine, std::move(last_seen)), std::move(done));
}

void start_contenders(const std::shared_ptr<engine_state>& engine, completion_ptr<std::vector<contender>> done) {
  start_spawned(engine->strand, contenders(engine), std::move(done));
}

void start_revoke(const std::shared_ptr<engine_state>& engine, std::string node, completion_ptr<> done) {
  start_spawned(engine->strand, revoke(engine, std::move(node)), std::move(done));
}

}  // namespace zkasio::detail
