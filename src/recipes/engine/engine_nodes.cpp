// A contender's node: created (with its parents), listed, found again after
// a lost reply, and deleted: never another session's.
#include "recipes/engine/engine_nodes.hpp"

namespace zkasio::detail {

namespace {

// Sends the listing contenders are waiting to share (next_listing), if any;
// it is in flight until its reply. On the strand.
void send_next_listing(const std::shared_ptr<engine_state>& m) {
  auto round = std::exchange(m->next_listing, nullptr);
  if (!round) return;
  m->listing_in_flight = true;
  m->s.async_get_children(m->path, asio::bind_executor(m->strand, [m, round](error_code ec, children kids) {
    round->ec = ec;
    if (!ec) round->view = std::make_shared<const queue_view>(m->known->view(lock_queue(std::move(kids.names), m->family)));
    round->ready.set();
    m->listing_in_flight = false;
    send_next_listing(m);
  }));
}

}  // namespace

// A listing sent after every request submitted so far (a session's requests
// run in order): contenders that ask before it goes out share it. At most
// one is in flight per lock object; those who ask meanwhile share the next,
// sent when its reply is in: after a cut, thousands of contenders whose
// replies trickle in would otherwise each send one, and thousands of
// listings of thousands of names are gigabytes.
//
// Relies on the order of replies: see send_create (src/recipes/engine/acquire_runner.cpp).
std::shared_ptr<listing_round> next_listing(const std::shared_ptr<engine_state>& m) {
  auto round = m->next_listing;
  if (!round) {
    round = m->next_listing = std::make_shared<listing_round>(m->strand);
    // Posted: the creates of every contender that runs before it go out first.
    if (!m->listing_in_flight) asio::post(m->strand, [m] { send_next_listing(m); });
  }
  return round;
}

awaitable<std::tuple<error_code, std::shared_ptr<const queue_view>>> fresh_listing(
    std::shared_ptr<engine_state> m) {
  auto round = next_listing(m);
  co_await round->ready.async_wait(as_tuple(use_awaitable));
  if (!round->ready.is_set())
    co_return std::make_tuple(error_code(asio::error::operation_aborted), nullptr);
  co_return std::make_tuple(round->ec, round->view);
}

// Waits until a request that failed with `ec` (retryable; or none yet) may
// be asked again: once connected, and after a server's busy answer
// (throttled_op, session_moved: the connection stands) a pause first (see
// busy_backoff.hpp). The session's error if it is over; operation_aborted
// if cancelled during the pause.
awaitable<error_code> until_retry(std::shared_ptr<engine_state> m, error_code ec) {
  if (busy_answer(ec)) {
    asio::steady_timer pause(m->strand, m->busy.next(std::chrono::steady_clock::now()));
    if (auto [pause_ec] = co_await pause.async_wait(as_tuple(use_awaitable)); pause_ec) co_return pause_ec;
  }
  auto [connect_ec] = co_await m->s.async_connect(as_tuple(use_awaitable));
  co_return connect_ec;
}

// Carries out node_removal's actions for `name` (the race recipes' node
// when empty) and feeds each answer back: decides nothing. The delete is
// sent pinned to the node's session (session::pinned), so that even an
// answer read late, after the next session began, sends nothing in it.
awaitable<error_code> remove_node(std::shared_ptr<engine_state> m, std::string_view name, node_removal::target t) {
  auto& s = m->s;
  node_removal fsm(t);
  // (The id is read after the generation: race_run::look says why.)
  auto look = [&s] { return node_removal::look{.generation = s.generation(), .session_id = s.id()}; };
  for (auto next = fsm.start(look());;) {
    if (auto* d = std::get_if<node_removal::done>(&next)) {
      if (d->forget) m->known->gone(name);
      co_return d->ec;
    }
    node_removal::event answer;
    if (auto* c = std::get_if<node_removal::connect>(&next)) {
      answer = node_removal::connected{co_await until_retry(m, c->after)};
    } else if (std::holds_alternative<node_removal::sync>(next)) {
      auto [ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
      answer = node_removal::synced{ec};
    } else if (std::holds_alternative<node_removal::look_up>(next)) {
      auto [ec, st] = co_await s.async_exists(m->full(name), as_tuple(use_awaitable));
      answer = node_removal::looked_up{ec, st};
    } else {
      auto [ec] = co_await s.pinned(fsm.generation()).async_remove(m->full(name), as_tuple(use_awaitable));
      answer = node_removal::removed{ec};
    }
    next = fsm.resume(answer, look());
  }
}

awaitable<error_code> delete_node(std::shared_ptr<engine_state> m, std::string_view name,
                                  std::int64_t owner_id, std::uint64_t generation, std::int64_t czxid) {
  return remove_node(std::move(m), name,
                     {.owner = owner_id, .generation = generation, .czxid = czxid, .race = name.empty()});
}

attempt fresh_attempt(const engine_state& m, const acquire_request& request) {
  return {.kind = request.kind,
          .uuid = make_uuid(),
          .data = request.data.value_or(m.options.data),
          .one_look = request.try_once,
          .node = {},
          .stat = {}};
}

// The node of its own owner that does not block an attempt.
std::string_view exempt(const attempt& a) {
  return a.downgrade_of ? std::string_view(*a.downgrade_of) : std::string_view();
}

// The ACL of the nodes the engine creates (lock_options::node_acl).
acl node_acl(const engine_state& m) {
  if (m.options.node_acl) return *m.options.node_acl;
  return m.s.authenticated() ? creator_all_world_read_acl() : open_acl_unsafe();
}

// Creates `path` and its parents when missing, as containers.
awaitable<error_code> create_parents(engine_state& m, const std::string& path, std::uint64_t generation) {
  const create_options container(create_mode::container, node_acl(m));
  auto pinned = m.s.pinned(generation);
  for (auto slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    auto parent = path.substr(0, slash);
    auto [ec, made] = co_await pinned.async_create(parent, "", container, as_tuple(use_awaitable));
    if (ec && ec != zk_error::node_exists) co_return ec;
    if (slash == std::string::npos) co_return error_code{};
  }
}

// Whether the attempt `a` rides through `ec` (decisions.hpp's rule).
bool ride_through(error_code ec, const session& s, const attempt& a) {
  return rides_through(ec, a.one_look, s.generation(), a.generation);
}

// Makes `path` and its parents for attempt `a`, whose create found none.
// Cut off meanwhile, it waits for the connection, and the caller creates
// again (in the same session; parents are shared containers: nothing to
// undo).
awaitable<error_code> make_parents(std::shared_ptr<engine_state> m, std::string path, const attempt& a) {
  auto ec = co_await create_parents(*m, path, a.generation);
  if (!ride_through(ec, m->s, a)) co_return ec;
  if (auto connect_ec = co_await until_retry(m, ec)) co_return connect_ec;
  co_return m->s.generation() == a.generation ? error_code{} : error_code(zk_error::session_expired);
}

namespace {

// After a lost create reply the create may have been applied: finds the node
// by its uuid, owned by the current session. nullopt: it is not there: create
// again. session_expired when the session expired meanwhile: the node, if it
// was made, went with it, and like every waiter of that session this one
// ends (it is not queued again in the next session). `create_ec`: how the
// create failed (a busy server's answer: a pause first, see until_retry).
// (A coroutine of its own, so that a waiter's frame does not carry all this.)
awaitable<std::optional<listing>> find_lost_node(std::shared_ptr<engine_state> m, attempt& a,
                                                 error_code create_ec) {
  auto& s = m->s;
  auto expired = [&] { return s.generation() != a.generation; };
  // Asked again while the connection fails (a lookup cut off is not an
  // answer): `failed` is the last request's error, create_ec at first.
  for (error_code failed = create_ec;;) {
    if (auto connect_ec = co_await until_retry(m, failed)) co_return listing(connect_ec, nullptr);
    if (expired()) co_return listing(make_error_code(zk_error::session_expired), nullptr);
    // Reconnected maybe to another server: it must have seen the create, if
    // the leader applied it, before it is asked.
    std::tie(failed) = co_await s.async_sync(m->path, as_tuple(use_awaitable));
    if (ride_through(failed, s, a)) continue;
    if (failed && failed != zk_error::no_node) co_return listing(failed, nullptr);
    // (Shared: after a cut, every contender whose create was in flight looks;
    // thousands of listings of thousands of names would be gigabytes.)
    std::shared_ptr<const queue_view> view;
    std::tie(failed, view) = co_await fresh_listing(m);
    // (A listing answered in a later session would not show the node either.)
    if (expired()) co_return listing(make_error_code(zk_error::session_expired), nullptr);
    if (ride_through(failed, s, a)) continue;
    if (failed == zk_error::no_node) co_return std::nullopt;  // the parent went (a container): so did the node
    if (failed) co_return listing(failed, nullptr);
    auto found = find_by_uuid(view->nodes, a.uuid);
    if (!found) co_return std::nullopt;
    std::optional<node_stat> st;
    std::tie(failed, st) = co_await s.async_exists(m->full(found->name), as_tuple(use_awaitable));
    if (expired()) co_return listing(make_error_code(zk_error::session_expired), nullptr);
    if (ride_through(failed, s, a)) continue;
    if (failed) co_return listing(failed, nullptr);
    if (!st || st->ephemeral_owner != s.id()) co_return std::nullopt;
    a.node = *found;
    a.stat = *st;
    m->known->add(a.node, m->session_in(a.generation), exempt(a));
    // The shared view was made before the contenders it answers knew their
    // nodes: the part up to mine (all a decision reads) is made again with
    // what is known now, lest nodes before mine that this process knows make
    // me list again once my predecessor goes. (One at a time on the strand:
    // a decision drops its view before the next.)
    auto mine = static_cast<std::size_t>(found - view->nodes.data());
    if (view->before[mine].others > 0)
      view = std::make_shared<const queue_view>(
          m->known->view({view->nodes.begin(), view->nodes.begin() + static_cast<std::ptrdiff_t>(mine) + 1}));
    co_return listing(error_code{}, std::move(view));
  }
}

}  // namespace

// After a failed or cancelled acquire: deletes the attempt's node if its
// create took effect: by name when its reply came, else found by uuid (a
// session's requests run in order, so a listing sent now sees a node created
// before). Only a node whose ephemeral owner is the current session: a node
// of an earlier session of this one went with it, and a node of another
// process never carries our uuid (and is never taken for ours if it did).
awaitable<error_code> remove_attempt_node(std::shared_ptr<engine_state> m, attempt a) {
  // No reply yet: found as after a lost reply. (The reply, if it comes, comes
  // before the lookup's listing, which shows the node then.)
  a.one_look = false;  // (a try's cleanup waits for the connection all the same)
  if (a.node.name.empty()) {
    auto found = co_await find_lost_node(m, a, {});
    if (!found) co_return error_code{};  // not made, or gone already
    // The session over: so is the node.
    if (auto ec = std::get<0>(*found)) co_return ec == zk_error::session_expired ? error_code{} : ec;
  }
  if (a.gone) co_return error_code{};
  co_return co_await delete_node(m, a.node.name, a.stat.ephemeral_owner, a.generation);
}

// The path's parent and the node's name in it.
std::pair<std::string, std::string> split_path(const std::string& path) {
  auto slash = path.rfind('/');
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace zkasio::detail
