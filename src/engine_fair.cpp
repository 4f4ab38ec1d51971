// The fair queue's acquire (mutex, shared_mutex, election): create, then
// wait in the queue until first.
#include "engine.hpp"

namespace zkasio::detail {

namespace {

// Waits for the node `name` to go: in this process when it is a node of the
// same session (`here`, see known_nodes), else with a watch on the server.
// Not a coroutine (see wait_here): `name` must live until the wait has
// started (it is read when the awaitable is awaited).
awaitable<std::tuple<std::error_code>> wait_gone(const std::shared_ptr<engine_state>& m, bool here,
                                                 const std::string& name) {
  if (here) return wait_here(m, [&engine = *m, &name](completion_ptr<> done) {
    engine.known->wait_gone(name, engine.strand, std::move(done));
  });
  return m->s.async_wait_deleted(m->full(name), as_tuple(use_awaitable));
}

enum class turn { first, relist };

// Waits until mine may be first, from the verdict on a listing: first when
// every node known below it went (to be verified: mine may be gone too), or
// relist when the queue must be listed again.
// (The verdict's parts as parameters: g++ 12 may destroy an aggregate passed
// by value in a co_await twice.)
awaitable<std::tuple<std::error_code, turn>> wait_turn(std::shared_ptr<engine_state> m, const attempt& a,
                                                       std::string predecessor, bool relist_after) {
  for (;;) {
    bool here = m->known->owned_by(predecessor, m->session_in(a.generation));
    auto [ec] = co_await wait_gone(m, here, predecessor);
    if (!ec && !here) m->known->gone(predecessor);  // (seen by the server's watch)
    if (!ec && m->s.generation() != a.generation) ec = make_error_code(zk_error::session_expired);
    if (ec) co_return std::make_tuple(ec, turn::relist);
    if (relist_after) co_return std::make_tuple(std::error_code{}, turn::relist);
    // Only known nodes were below: which of them may still be there is known.
    auto next = m->known->below(a.node, exempt(a));
    if (next.what == known_nodes::below_result::first) co_return std::make_tuple(std::error_code{}, turn::first);
    if (next.what == known_nodes::below_result::relist) co_return std::make_tuple(std::error_code{}, turn::relist);
    predecessor = std::move(next.name);
  }
}

// Whether mine is still there (an operator may have deleted it while it
// waited): a grant needs its node.
awaitable<std::tuple<std::error_code, bool>> still_there(std::shared_ptr<engine_state> m, const attempt& a) {
  auto [ec, st] = co_await m->s.async_exists(m->full(a.node.name), as_tuple(use_awaitable));
  co_return std::make_tuple(ec, !ec && st && st->ephemeral_owner == a.stat.ephemeral_owner &&
                                    st->ephemeral_owner == m->s.id());
}

// What the acquire does once nothing ahead blocks it: grant, fail, or list
// again (the checks before a grant ran into a cut-off, or were too old).
struct before_grant {
  enum { grant, fail, relist } what = grant;
  std::error_code ec{};  // fail's error; relist's cause (until_retry's)
};

// The checks before a grant. `verify_node`: mine may have gone while it
// waited (an operator's delete), or an election's candidate checks whose it
// is: a grant needs its node. A downgrade is granted only if its write node
// is still there once the read node is known (see known_nodes): a writer of
// this process that saw the write node go before would not have seen the
// read node (asked after a sync: the server answering may lag behind the
// leader). And no grant is made on replies too old to be sure of the session
// (session_sure): decided again, after a sync.
awaitable<before_grant> check_before_grant(std::shared_ptr<engine_state> m, attempt& a, bool verify_node) {
  auto& s = m->s;
  auto cut_off = [&](std::error_code ec) { return ride_through(ec, s, a); };
  if (verify_node) {
    auto [check_ec, there] = co_await still_there(m, a);
    if (cut_off(check_ec)) co_return before_grant{before_grant::relist, check_ec};
    if (check_ec) co_return before_grant{before_grant::fail, check_ec};
    if (!there) {
      a.gone = true;
      m->known->gone(a.node.name);
      co_return before_grant{before_grant::fail, make_error_code(error::lock_lost)};
    }
  }
  if (a.downgrade_of) {
    auto [sync_ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
    if (cut_off(sync_ec)) co_return before_grant{before_grant::relist, sync_ec};
    if (sync_ec) co_return before_grant{before_grant::fail, sync_ec};
    auto [check_ec, st] = co_await s.async_exists(m->full(*a.downgrade_of), as_tuple(use_awaitable));
    if (cut_off(check_ec)) co_return before_grant{before_grant::relist, check_ec};
    if (check_ec) co_return before_grant{before_grant::fail, check_ec};
    if (!st || st->ephemeral_owner != a.stat.ephemeral_owner)
      co_return before_grant{before_grant::fail, make_error_code(error::lock_lost)};
  }
  if (!session_sure(*m)) {
    if (auto never = never_sure(*m)) co_return before_grant{before_grant::fail, never};
    auto [sync_ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
    co_return before_grant{before_grant::relist, sync_ec};
  }
  co_return before_grant{};
}

// The whole acquire: create, then wait in the queue until first. (One call
// site of each awaited step: g++ gives every call site its own slots in the
// frame, which every waiter carries.)
awaitable<std::tuple<std::error_code, lock>> queue_up(std::shared_ptr<engine_state> m,
                                                      std::optional<owner> who, bool try_once,
                                                      attempt& a) {
  auto& s = m->s;
  auto failed = [](std::error_code ec) { return std::make_tuple(ec, lock{}); };
  if (auto ec = co_await until_connected(s, try_once)) co_return failed(ec);
  auto [ec, view] = co_await create_node(m, a);
  // Set when the queue must be listed again: after this failure (retryable), if any.
  std::optional<std::error_code> relist;
  for (;;) {
    if (relist) std::tie(ec, view) = co_await relist_when_connected(m, *std::exchange(relist, std::nullopt));
    if (ride_through(ec, s, a) && a.node.name.size()) {
      relist = ec;
      continue;
    }
    if (ec) co_return failed(ec);
    if (s.generation() != a.generation) co_return failed(make_error_code(zk_error::session_expired));
    auto verdict = decide(*view, a.node, exempt(a));
    view.reset();  // a waiter keeps no listing: there may be thousands of both
    if (verdict.what == lock_verdict::missing) {
      a.gone = true;
      m->known->gone(a.node.name);
      co_return failed(make_error_code(error::lock_lost));
    }
    if (verdict.what == lock_verdict::wait && try_once) co_return failed(make_error_code(error::lock_busy));
    if (verdict.what == lock_verdict::wait) {
      auto [wait_ec, next] = co_await wait_turn(m, a, std::move(verdict.predecessor), verdict.relist_after);
      std::error_code cut_off;
      if (ride_through(wait_ec, s, a)) cut_off = std::exchange(wait_ec, {});
      if (wait_ec) co_return failed(wait_ec);
      if (next == turn::relist) {
        relist = cut_off;
        continue;
      }
    }
    // First by what this process knows (a listing would have shown mine), or
    // by a listing.
    auto check = co_await check_before_grant(m, a, verdict.what == lock_verdict::wait || a.confirm_owner);
    if (check.what == before_grant::fail) co_return failed(check.ec);
    if (check.what == before_grant::relist) {
      relist = check.ec;
      continue;
    }
    co_return std::make_tuple(std::error_code{}, granted(m, a, who));
  }
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, lock>> acquire(std::shared_ptr<engine_state> state,
                                                         acquire_request request) {
  if (co_await cancelled_already()) co_return std::make_tuple(std::error_code(asio::error::operation_aborted), lock{});
  auto a = fresh_attempt(*state, request);
  if (request.who) {
    // (Queueing behind its own node would wait for ever.)
    auto again = reentry_of(*state, *request.who, request.kind);
    switch (again.what) {
      case reentry::none: break;
      case reentry::again: co_return std::make_tuple(std::error_code{}, grant_of(again.h));
      case reentry::lost: co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
      case reentry::deadlock: co_return std::make_tuple(make_error_code(error::would_deadlock), lock{});
      case reentry::downgrade:
        a.downgrade_of = again.h->name;
        a.downgrade_token = again.h->token;
        break;
    }
  }
  run_lead lead;
  if (state->options.local_handoff) {
    auto [ec, handed, led] = co_await join_run(state, request);
    if (ec || handed) co_return std::make_tuple(ec, std::move(handed));
    lead = std::move(led);
  }
  for (;;) {
    auto result = co_await settle(state->s, queue_up(state, request.who, request.try_once, a), request.deadline, [&] {
      std::vector<attempt> attempts;
      attempts.push_back(std::move(a));
      return discard(state, std::move(attempts));
    });
    if (!std::get<0>(result)) lead.hand_to(std::get<1>(result));
    if (a.downgrade_of || !queue_again(std::get<0>(result), *state, request.try_once, a.generation)) co_return result;
    a = fresh_attempt(*state, request);
  }
}

}  // namespace zkasio::detail
