// The race recipes (race_mutex, election's race mode): one EPHEMERAL node at
// the path, created by whoever is first.
#include "engine.hpp"

namespace zkasio::detail {

namespace {

// Waits for this session's turn at the race node (see local_turns.hpp); from
// then on the attempt holds it: its node, when it has one, is the only one
// of this session on the path. session_expired if the session it queued in
// ended meanwhile.
// With `try_once`, lock_busy at once when it is another's turn.
awaitable<std::error_code> take_turn(std::shared_ptr<engine_state> m, attempt& a, bool try_once) {
  local_turns::line_key key{m->core, a.generation};
  if (try_once) {
    a.turn = m->turns->try_take(key);
    if (m->s.generation() != a.generation) co_return make_error_code(zk_error::session_expired);
    co_return a.turn ? std::error_code{} : make_error_code(error::lock_busy);
  }
  if (auto [ec] = co_await wait_here(m, [&](completion_ptr<> done) { m->turns->enter(key, m->strand, std::move(done)); }); ec)
    co_return ec;
  a.turn = m->turns->take(key);
  co_return m->s.generation() == a.generation ? std::error_code{} : make_error_code(zk_error::session_expired);
}

// Whether a race contender's create took effect, after it failed with
// `create_ec` (retryable) or was cancelled: the node at the path, after a
// sync, if the attempt's session owns it (with the session's turn, such a
// node is this attempt's); nullopt if not. Asked again while the connection
// fails; session_expired once the attempt's session is over (the node, if
// made, went with it).
awaitable<std::tuple<std::error_code, std::optional<node_stat>>> find_race_node(std::shared_ptr<engine_state> m,
                                                                               const attempt& a,
                                                                               std::error_code create_ec) {
  auto& s = m->s;
  auto failure = [](std::error_code ec) { return std::make_tuple(ec, std::optional<node_stat>()); };
  // `failed`: the last request's error, create_ec at first.
  for (std::error_code failed = create_ec;;) {
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

// What a race contender makes of the node at the path that its create
// found there. With this session's turn, a node of this session is nobody's
// (one whose delete failed, a hold's release): deleted, and the contender
// creates again. Once is enough: while the attempt has the turn, this
// session makes no other. Cut off, it looks again once connected. A
// persistent node would be waited for in vain: node_exists.
enum class found_node { others, create_again, look_again };
awaitable<std::tuple<std::error_code, found_node>> clear_own_node(std::shared_ptr<engine_state> m, const attempt& a) {
  auto result = [](std::error_code ec, found_node next) { return std::make_tuple(ec, next); };
  auto [stat_ec, st] = co_await m->s.async_exists(m->path, as_tuple(use_awaitable));
  if (ride_through(stat_ec, m->s, a)) {
    auto connect_ec = co_await until_retry(m, stat_ec);
    co_return result(connect_ec, found_node::look_again);
  }
  if (stat_ec) co_return result(stat_ec, found_node::others);
  if (st && st->ephemeral_owner == 0) co_return result(make_error_code(zk_error::node_exists), found_node::others);
  if (!st || st->ephemeral_owner != a.session_id) co_return result({}, found_node::others);
  auto delete_ec = co_await delete_node(m, "", st->ephemeral_owner, st->czxid);
  if (delete_ec == error::lock_lost) delete_ec = {};
  co_return result(delete_ec, found_node::create_again);
}

// After a create that may have taken effect (`create_ec`: retryable), or
// that did but whose reply came too late to be sure of the session: the
// attempt's node, looked up until a look is recent enough (session_sure);
// nullopt when it is not there (create again).
awaitable<std::tuple<std::error_code, std::optional<node_stat>>> find_race_node_when_sure(
    std::shared_ptr<engine_state> m, const attempt& a, std::error_code create_ec) {
  for (;;) {
    auto [find_ec, mine] = co_await find_race_node(m, a, std::exchange(create_ec, {}));
    if (find_ec || !mine || session_sure(*m)) co_return std::make_tuple(find_ec, mine);
    if (auto never = never_sure(*m)) co_return std::make_tuple(never, std::optional<node_stat>());
  }
}

// Seed 003's non-fair way: create the one EPHEMERAL node at the path; if it
// exists, wait for its deletion (a watch every waiter sets: each release
// wakes them all, the herd) and race again. A lost create reply is answered
// by the node's ephemeral owner: with this session's turn, a node of this
// session is this attempt's.
awaitable<std::tuple<std::error_code, lock>> race_for(std::shared_ptr<engine_state> m, std::optional<owner> who,
                                                      bool try_once, attempt& a) {
  auto& s = m->s;
  auto failed = [](std::error_code ec) { return std::make_tuple(ec, lock{}); };
  if (auto ec = co_await until_connected(s, try_once)) co_return failed(ec);
  a.generation = s.generation();
  if (auto ec = co_await take_turn(m, a, try_once)) co_return failed(ec);
  // The id of a.generation's session (if the generation is still
  // a.generation below): read after the generation, which is counted after
  // the old id is cleared, the new id coming with the handshake
  // (session_impl::on_unrecoverable). 0: that session is not made yet.
  while ((a.session_id = s.id()) == 0) {
    if (auto [ec] = co_await s.async_connect(as_tuple(use_awaitable)); ec) co_return failed(ec);
    if (s.generation() != a.generation) co_return failed(make_error_code(zk_error::session_expired));
  }
  bool checked_own = false;
  for (int parents_made = 0;;) {
    if (s.generation() != a.generation) co_return failed(make_error_code(zk_error::session_expired));
    a.submitted = true;
    auto [ec, made] = co_await s.async_create(m->path, a.data, create_options(create_mode::ephemeral, node_acl(*m)),
                                              as_tuple(use_awaitable));
    if (!ec && session_sure(*m)) {
      a.stat = made.stat;
      co_return std::make_tuple(std::error_code{}, granted(m, a, who));
    }
    if (ec == zk_error::node_exists && !checked_own) {
      auto [own_ec, next] = co_await clear_own_node(m, a);
      if (own_ec) co_return failed(own_ec);
      checked_own = next != found_node::look_again;
      if (next != found_node::others) continue;
    }
    if (ec == zk_error::node_exists) {
      if (try_once) co_return failed(make_error_code(error::lock_busy));
      auto [wait_ec] = co_await s.async_wait_deleted(m->path, as_tuple(use_awaitable));
      if (ride_through(wait_ec, s, a)) wait_ec = co_await until_retry(m, wait_ec);
      if (wait_ec) co_return failed(wait_ec);
      continue;
    }
    if (ec == zk_error::no_node && parents_made++ < 3) {
      if (auto parents_ec = co_await make_parents(m, split_path(m->path).first, a)) co_return failed(parents_ec);
      continue;
    }
    if (ec && (ec != condition::retryable || a.one_look)) co_return failed(ec);
    // The create may have taken effect (its reply lost), or took effect but
    // its reply came too late to be sure of the session (session_sure).
    auto [find_ec, mine] = co_await find_race_node_when_sure(m, a, ec);
    if (find_ec) co_return failed(find_ec);
    if (mine) {
      a.stat = *mine;
      co_return std::make_tuple(std::error_code{}, granted(m, a, who));
    }
  }
}

// After a failed or cancelled race: deletes the node if this attempt's
// create took effect (this session's node: the attempt has the session's
// turn, which it keeps until then).
awaitable<std::error_code> remove_race_node(std::shared_ptr<engine_state> m, attempt a) {
  a.one_look = false;  // (a try's cleanup waits for the connection all the same)
  auto [ec, mine] = co_await find_race_node(m, a, {});
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
