// The semaphore's leases (Curator's InterProcessSemaphoreV2).
#include "engine.hpp"
#include "acquire_runner.hpp"
#include "room_wait.hpp"

namespace zkasio::detail {

namespace {

// The semaphore's mutex as its holder sees it: set the moment the mutex may
// be lost (see room_wait.hpp). (A latch: the loss may come while the wait is
// listing, not waiting.)
using guard_watch = strand_latch;

// Until the leases' children leave room for all of `mine` (room_wait.hpp
// decides; this carries its actions out on the session).
awaitable<std::error_code> wait_for_room(std::shared_ptr<engine_state> m, const std::vector<attempt>& mine,
                                         std::size_t max, bool try_once, std::shared_ptr<guard_watch> guard) {
  auto& s = m->s;
  room_wait::leases leases{.generation = mine.front().generation, .max = max, .one_look = try_once};
  for (auto& a : mine) leases.names.push_back(a.node.name);
  room_wait fsm(std::move(leases));
  auto now = [&] {
    return room_wait::look{s.generation(), session_sure(*m), never_sure(*m), guard->is_set()};
  };
  for (auto next = fsm.start(now());;) {
    room_wait::event e;
    if (auto* f = std::get_if<room_wait::fail>(&next)) co_return f->ec;
    if (std::holds_alternative<room_wait::granted>(next)) co_return std::error_code{};
    if (std::holds_alternative<room_wait::list>(next)) {
      auto [ec, kids] = co_await s.async_get_children(m->path, as_tuple(use_awaitable));
      e = room_wait::listed{ec, std::move(kids.names), kids.stat.cversion};
    } else if (std::holds_alternative<room_wait::sync>(next)) {
      auto [ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
      e = room_wait::synced{ec};
    } else if (auto* c = std::get_if<room_wait::connect>(&next)) {
      e = room_wait::connected{co_await until_retry(m, c->after)};
    } else {
      auto cversion = std::get<room_wait::watch>(next).cversion;
      auto woken = co_await (s.async_wait_children_changed(m->path, cversion, as_tuple(use_awaitable)) ||
                             guard->async_wait(as_tuple(use_awaitable)));
      if (woken.index() == 1 && !guard->is_set()) co_return std::error_code(asio::error::operation_aborted);
      if (woken.index() == 1) e = room_wait::mutex_lost{};
      else e = room_wait::changed{std::get<0>(std::get<0>(woken))};
    }
    next = fsm.resume(e, now());
  }
}

// Creates the lease nodes of `mine`, then waits for room for all of them.
awaitable<std::tuple<std::error_code>> take_leases(std::shared_ptr<engine_state> m, std::vector<attempt>& mine,
                                                   std::size_t max, bool try_once,
                                                   std::shared_ptr<guard_watch> guard) {
  for (auto& a : mine) {
    auto [ec] = co_await async_create_node(m, a, as_tuple(use_awaitable));
    if (!ec && a.generation != mine.front().generation) ec = make_error_code(zk_error::session_expired);
    if (ec) co_return std::make_tuple(ec);
  }
  co_return std::make_tuple(co_await wait_for_room(m, mine, max, try_once, std::move(guard)));
}

// One attempt of acquire_leases; `mutex_lost` tells whether the semaphore's
// mutex may have been lost while it waited for room.
asio::awaitable<std::tuple<std::error_code, std::vector<lock>>> lease_attempt(std::shared_ptr<engine_state> leases,
                                                                            std::shared_ptr<engine_state> locks,
                                                                            lease_request request, bool& mutex_lost) {
  using result_type = std::tuple<std::error_code, std::vector<lock>>;
  auto failed = [](std::error_code ec) { return result_type(ec, std::vector<lock>{}); };
  if (co_await cancelled_already()) co_return failed(asio::error::operation_aborted);
  if (request.count < 1 || request.count > request.max)
    co_return failed(make_error_code(error::invalid_lease_count));
  // One acquirer at a time waits for room (the semaphore's mutex, as
  // Curator's): so n leases are taken all at once, and no two zkasio
  // acquirers of several leases can each hold part of what the other waits
  // for.
  std::vector<attempt> mine;
  for (std::size_t i = 0; i < request.count; ++i)
    mine.push_back({.kind = node_kind::lease,
                    .uuid = make_uuid(),
                    .data = leases->options.data,
                    .one_look = request.try_once,
                    .node = {},
                    .stat = {}});
  std::error_code ec;
  lock guard;  // (released in the background when dropped)
  try {
    std::tie(ec, guard) = co_await async_acquire(locks, {.try_once = request.try_once, .deadline = request.deadline},
                                                 as_tuple(use_awaitable));
    if (ec) co_return failed(ec);
    auto watch = std::make_shared<guard_watch>(leases->strand);
    // (Emitted on the locks' strand, which is this one: see semaphore.hpp.)
    guard.lost_slot().assign([watch](asio::cancellation_type) { watch->set(); });
    if (request.deadline)
      std::tie(ec) = co_await until(leases->s, take_leases(leases, mine, request.max, request.try_once, watch), *request.deadline);
    else
      std::tie(ec) = co_await take_leases(leases, mine, request.max, request.try_once, watch);
    mutex_lost = watch->is_set();
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  if (ec) {
    auto removing = discard(leases, std::move(mine));
    if (ec == error::lock_busy) {
      try {
        ec = co_await busy_after(std::move(removing));
      } catch (const std::system_error&) {
        ec = asio::error::operation_aborted;
      }
    }
    co_return failed(ec);
  }
  std::vector<lock> held;
  for (auto& a : mine) held.push_back(granted(leases, a, std::nullopt));
  co_return result_type(std::error_code{}, std::move(held));
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, std::vector<lock>>> acquire_leases(std::shared_ptr<engine_state> leases,
                                                                             std::shared_ptr<engine_state> locks,
                                                                             lease_request request) {
  for (;;) {
    bool mutex_lost = false;
    auto generation = leases->s.generation();
    auto result = co_await lease_attempt(leases, locks, request, mutex_lost);
    auto& ec = std::get<0>(result);
    // The semaphore's mutex may be lost while the acquirer waits for room
    // (disconnected past the policy's patience, its node deleted, its
    // session expiring): its lease nodes are deleted, and as it held no
    // lease, nothing is lost to the caller. In the same session it queues
    // again for the mutex, within its deadline; after an expiry, as any
    // waiter of an expired session (requeue_on_expiry).
    if (mutex_lost && ec == error::lock_lost && !request.try_once) {
      if (leases->s.generation() == generation && leases->s.state() != session_state::expired) continue;
      ec = make_error_code(zk_error::session_expired);
    }
    if (!queue_again(ec, *leases, request.try_once, generation)) co_return result;
  }
}

asio::awaitable<std::tuple<std::error_code, lock>> acquire_lease(std::shared_ptr<engine_state> leases,
                                                               std::shared_ptr<engine_state> locks,
                                                               lease_request request) {
  auto [ec, held] = co_await acquire_leases(std::move(leases), std::move(locks), request);
  co_return std::make_tuple(ec, held.empty() ? lock{} : std::move(held.front()));
}

}  // namespace zkasio::detail
