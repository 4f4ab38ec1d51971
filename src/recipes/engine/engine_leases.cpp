// The semaphore's leases (Curator's InterProcessSemaphoreV2).
#include "recipes/engine/engine_acquire.hpp"
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"
#include "recipes/engine/acquire_runner.hpp"
#include "recipes/machines/lease_acquire.hpp"
#include "recipes/machines/room_wait.hpp"

namespace zkasio::detail {

namespace {

// The semaphore's mutex as its holder sees it: set the moment the mutex may
// be lost (see room_wait.hpp). (A latch: the loss may come while the wait is
// listing, not waiting.)
using guard_watch = strand_latch;

// Until the leases' children leave room for all of `mine` (room_wait.hpp
// decides; this carries its actions out on the session).
awaitable<std::tuple<std::error_code>> wait_for_room(std::shared_ptr<engine_state> m, const std::vector<attempt>& mine,
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
    if (auto* f = std::get_if<room_wait::fail>(&next)) co_return std::make_tuple(f->ec);
    if (std::holds_alternative<room_wait::granted>(next)) co_return std::make_tuple(std::error_code{});
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
      if (woken.index() == 1 && !guard->is_set()) co_return std::make_tuple(std::error_code(asio::error::operation_aborted));
      if (woken.index() == 1) e = room_wait::mutex_lost{};
      else e = room_wait::changed{std::get<0>(std::get<0>(woken))};
    }
    next = fsm.resume(e, now());
  }
}

// An attempt's leases, not made yet.
std::vector<attempt> fresh_leases(const engine_state& leases, std::size_t count, bool try_once) {
  std::vector<attempt> mine;
  for (std::size_t i = 0; i < count; ++i)
    mine.push_back(fresh_attempt(leases, {.kind = node_kind::lease, .try_once = try_once}));
  return mine;
}

}  // namespace

// lease_acquire's runner: each action carried out on the session (the
// deadline over each), its end fed back in. Cancelled (a co_await throws),
// what the attempt made goes in the background.
asio::awaitable<std::tuple<std::error_code, std::vector<lock>>> acquire_leases(std::shared_ptr<engine_state> leases,
                                                                             std::shared_ptr<engine_state> locks,
                                                                             lease_request request) {
  using result_type = std::tuple<std::error_code, std::vector<lock>>;
  auto failed = [](std::error_code ec) { return result_type(ec, std::vector<lock>{}); };
  if (co_await cancelled_already()) co_return failed(asio::error::operation_aborted);
  lease_acquire fsm({.count = request.count,
                     .max = request.max,
                     .try_once = request.try_once,
                     .requeue_on_expiry = leases->options.requeue_on_expiry});
  auto now = [&s = leases->s] {
    auto state = s.state();
    return lease_acquire::look{s.generation(), state == session_state::expired, state == session_state::closed};
  };
  std::vector<attempt> mine;
  lock guard;  // the semaphore's mutex, while an attempt holds it (released in the background when dropped)
  std::shared_ptr<guard_watch> watch;
  std::vector<background<std::error_code>> removing;
  try {
    for (auto next = fsm.start(now());;) {
      lease_acquire::event e;
      if (std::holds_alternative<lease_acquire::granted>(next)) {
        std::vector<lock> held;
        for (auto& a : mine) held.push_back(granted(leases, a, std::nullopt));
        co_return result_type(std::error_code{}, std::move(held));
      }
      if (auto* f = std::get_if<lease_acquire::fail>(&next)) {
        if (f->after_removal) co_return failed(co_await busy_after(std::move(removing)));
        co_return failed(f->ec);
      }
      if (std::holds_alternative<lease_acquire::take_mutex>(next)) {
        guard = {};
        mine = fresh_leases(*leases, request.count, request.try_once);
        auto [ec, taken] = co_await async_acquire(
            locks, {.try_once = request.try_once, .deadline = request.deadline}, as_tuple(use_awaitable));
        guard = std::move(taken);
        if (!ec) {
          watch = std::make_shared<guard_watch>(leases->strand);
          // (Emitted on the locks' strand, which is this one: see semaphore.hpp.)
          guard.lost_slot().assign([watch](asio::cancellation_type) { watch->set(); });
        }
        e = lease_acquire::mutex_taken{ec};
      } else if (auto* l = std::get_if<lease_acquire::make_lease>(&next)) {
        auto& a = mine[l->index];
        auto [ec] = co_await within(leases->s, async_create_node(leases, a, as_tuple(use_awaitable)), request.deadline);
        e = lease_acquire::lease_made{ec, a.generation};
      } else {
        auto [ec] = co_await within(leases->s, wait_for_room(leases, mine, request.max, request.try_once, watch),
                                    request.deadline);
        e = lease_acquire::room_ended{ec, watch->is_set()};
      }
      next = fsm.resume(e, now());
      // The attempt left (failed, or another begins), whatever the event
      // said (a lease answered without an error in a session that has
      // ended): its leases go before what follows is carried out.
      if (std::holds_alternative<lease_acquire::take_mutex>(next) || std::holds_alternative<lease_acquire::fail>(next))
        removing = discard(leases, std::exchange(mine, {}));
    }
  } catch (const std::system_error& e) {
    discard(leases, std::move(mine));
    co_return failed(e.code());
  }
}

asio::awaitable<std::tuple<std::error_code, lock>> acquire_lease(std::shared_ptr<engine_state> leases,
                                                               std::shared_ptr<engine_state> locks,
                                                               lease_request request) {
  auto [ec, held] = co_await acquire_leases(std::move(leases), std::move(locks), request);
  co_return std::make_tuple(ec, held.empty() ? lock{} : std::move(held.front()));
}

}  // namespace zkasio::detail
