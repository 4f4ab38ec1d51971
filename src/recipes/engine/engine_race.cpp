// The race recipes (race_mutex, election's race mode): one EPHEMERAL node at
// the path, created by whoever is first.
#include "recipes/engine/engine_acquire.hpp"
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"
#include "recipes/machines/race_acquire.hpp"

namespace zkasio::detail {

namespace {

// Whether a race contender's create took effect: the node at the path,
// after a sync, if the attempt's session owns it (with the session's turn,
// such a node is this attempt's); nullopt if not. Asked again while the
// connection fails; session_expired once the attempt's session is over (the
// node, if made, went with it).
awaitable<std::tuple<std::error_code, std::optional<node_stat>>> find_race_node(std::shared_ptr<engine_state> m,
                                                                               const attempt& a) {
  auto& s = m->s;
  auto failure = [](std::error_code ec) { return std::make_tuple(ec, std::optional<node_stat>()); };
  // `failed`: the last request's error.
  for (std::error_code failed;;) {
    if (auto connect_ec = co_await until_retry(m, failed)) co_return failure(connect_ec);
    if (s.generation() != a.generation) co_return failure(make_error_code(zk_error::session_expired));
    std::tie(failed) = co_await s.async_sync(m->path, as_tuple(use_awaitable));
    if (ride_through(failed, s, a)) continue;
    if (failed && failed != zk_error::no_node) co_return failure(failed);
    std::optional<node_stat> st;
    std::tie(failed, st) = co_await s.async_exists(m->path, as_tuple(use_awaitable));
    if (ride_through(failed, s, a)) continue;
    if (failed) co_return failure(failed);
    if (st && st->ephemeral_owner != a.session_id) st.reset();
    co_return std::make_tuple(std::error_code{}, st);
  }
}

// Seed 003's non-fair way: create the one EPHEMERAL node at the path; if it
// exists, wait for its deletion (a watch every waiter sets: each release
// wakes them all, the herd) and race again. race_acquire.hpp decides; this
// carries its actions out, keeping `a` (the turn, the session, whether a
// create was sent) current for the cleanup of a failed or cancelled race.
awaitable<std::tuple<std::error_code, lock>> race_for(std::shared_ptr<engine_state> m, std::optional<owner> who,
                                                      bool try_once, attempt& a) {
  auto& s = m->s;
  race_acquire fsm(try_once);
  // The id is read after the generation, which is counted after the old id
  // is cleared, the new id coming with the handshake
  // (session_impl::on_unrecoverable): an id read with a generation is that
  // generation's session's, or 0 (not made yet).
  auto now = [&] {
    return race_acquire::look{.generation = s.generation(),
                              .session_id = s.id(),
                              .connected = s.state() == session_state::connected,
                              .awaiting_server = awaiting_server(s),
                              .sure = session_sure(*m),
                              .never_sure = never_sure(*m)};
  };
  for (auto next = fsm.start(now());;) {
    a.generation = fsm.generation();
    a.session_id = fsm.session_id();
    race_acquire::event e;
    if (auto* f = std::get_if<race_acquire::fail>(&next)) co_return std::make_tuple(f->ec, lock{});
    if (auto* g = std::get_if<race_acquire::granted>(&next)) {
      a.stat = g->stat;
      co_return std::make_tuple(std::error_code{}, granted(m, a, who));
    }
    if (auto* c = std::get_if<race_acquire::connect>(&next)) {
      e = race_acquire::connected{co_await until_retry(m, c->after)};
    } else if (auto* t = std::get_if<race_acquire::take_turn>(&next)) {
      // (See local_turns.hpp. From then on the attempt holds the turn: its
      // node, when it has one, is the only one of this session on the path.)
      local_turns::line_key key{m->core, a.generation};
      std::error_code ec;
      if (!t->wait) {
        a.turn = m->turns->try_take(key);
      } else {
        std::tie(ec) = co_await wait_here(m, [&](completion_ptr<> done) { m->turns->enter(key, m->strand, std::move(done)); });
        if (!ec) a.turn = m->turns->take(key);
      }
      e = race_acquire::turn_taken{ec, a.turn != nullptr};
    } else if (std::holds_alternative<race_acquire::create>(next)) {
      a.submitted = true;
      auto [ec, made] = co_await s.async_create(m->path, a.data, create_options(create_mode::ephemeral, node_acl(*m)),
                                                as_tuple(use_awaitable));
      e = race_acquire::created{ec, made.stat};
    } else if (std::holds_alternative<race_acquire::look_up>(next)) {
      auto [ec, st] = co_await s.async_exists(m->path, as_tuple(use_awaitable));
      e = race_acquire::looked_up{ec, st};
    } else if (std::holds_alternative<race_acquire::sync>(next)) {
      auto [ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
      e = race_acquire::synced{ec};
    } else if (auto* r = std::get_if<race_acquire::remove_own>(&next)) {
      e = race_acquire::removed{co_await delete_node(m, "", r->owner, r->czxid)};
    } else if (std::holds_alternative<race_acquire::watch>(next)) {
      auto [ec] = co_await s.async_wait_deleted(m->path, as_tuple(use_awaitable));
      e = race_acquire::gone{ec};
    } else {
      e = race_acquire::parents_made{co_await make_parents(m, split_path(m->path).first, a)};
    }
    next = fsm.resume(e, now());
  }
}

// After a failed or cancelled race: deletes the node if this attempt's
// create took effect (this session's node: the attempt has the session's
// turn, which it keeps until then).
awaitable<std::error_code> remove_race_node(std::shared_ptr<engine_state> m, attempt a) {
  a.one_look = false;  // (a try's cleanup waits for the connection all the same)
  auto [ec, mine] = co_await find_race_node(m, a);
  if (ec == zk_error::session_expired) co_return std::error_code{};  // it went with its session
  if (ec || !mine) co_return ec;
  co_return co_await delete_node(m, "", mine->ephemeral_owner, a.stat.czxid ? a.stat.czxid : mine->czxid);
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, lock>> race(std::shared_ptr<engine_state> state, acquire_request request) {
  if (co_await cancelled_already()) co_return std::make_tuple(std::error_code(asio::error::operation_aborted), lock{});
  if (request.who)
    if (auto held = reentry_of(*state, *request.who, node_kind::lock); held.what != reentry::none)
      co_return std::make_tuple(held.what == reentry::again ? std::error_code{} : make_error_code(error::lock_lost),
                                held.what == reentry::again ? grant_of(held.h) : lock{});
  request.kind = node_kind::lock;  // (an election's too: one node of no queue's kind)
  auto a = fresh_attempt(*state, request);  // its node: the path itself (name "", engine_state::full)
  for (;;) {
    auto result = co_await settle(state->s, race_for(state, request.who, request.try_once, a), request.deadline, [&] {
      // (Without its turn the attempt was granted: the deadline's `||` dropped
      // the lock, whose release deletes the node.)
      std::vector<background<std::error_code>> removing;
      if (a.submitted && a.turn) removing.emplace_back(state->strand, remove_race_node(state, std::move(a)));
      return removing;
    });
    if (!queue_again(std::get<0>(result), *state, request.try_once, a.generation)) co_return result;
    a = fresh_attempt(*state, request);
  }
}

}  // namespace zkasio::detail
