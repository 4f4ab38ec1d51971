// A mutex's in-process handoff (lock_options::local_handoff): the lock
// object's contenders take turns under one node, handed over in memory
// (see local_run in engine.hpp, next_after_release in lock_queue.hpp).
#include "engine.hpp"

namespace zkasio::detail {

awaitable<std::tuple<std::error_code>> wait_in_run(const std::shared_ptr<engine_state>& m, std::optional<owner> who,
                                                   std::shared_ptr<local_turn> turn) {
  return wait_here(m, [&engine = *m, who = std::move(who), turn = std::move(turn)](completion_ptr<> done) mutable {
    // A cancelled waiter leaves the line at once (the line may be long).
    done->on_cancel = [&waiting = engine.run.waiting, raw = done.get()] {
      std::erase_if(waiting, [&](const local_run::waiter& w) { return w.done.get() == raw; });
    };
    engine.run.waiting.push_back({std::move(done), std::move(who), std::move(turn)});
  });
}

namespace {

// The next waiter not cancelled meanwhile, or none.
std::optional<local_run::waiter> next_waiter(local_run& run) {
  while (!run.waiting.empty()) {
    auto w = std::move(run.waiting.front());
    run.waiting.pop_front();
    if (!w.done->done()) return w;
  }
  return std::nullopt;
}

}  // namespace

void pass_lead(engine_state& m) {
  auto next = next_waiter(m.run);
  m.run.active = next.has_value();
  if (!next) return;
  next->turn->leads = true;
  next->done->complete({});
}

bool lead_run(hold& h) {
  if (h.lost) return false;
  h.in_run = true;
  return true;
}

namespace {

// Whether the node of `h` is as sure to be there as a grant at the server
// needs: not known lost, its session the same and sure to live, and under
// on_suspend connected. (A delete by someone else not yet notified is not
// known here: the new holder's lost signal fires when it is.)
bool node_sure(const hold& h) {
  const auto& m = *h.engine;
  bool connected_enough = m.options.policy != lost_policy::on_suspend || m.s.state() == session_state::connected;
  return !h.lost && m.s.generation() == h.generation && session_sure(m) && connected_enough;
}

}  // namespace

bool hand_off(const std::shared_ptr<hold>& h) {
  auto& m = *h->engine;
  const auto& bound = *m.options.local_handoff;
  auto& waiting = m.run.waiting;
  std::erase_if(waiting, [](const local_run::waiter& w) { return w.done->done(); });
  auto next = next_after_release(h->budget, bound.max_run, bound.max_time, !waiting.empty(), node_sure(*h),
                                 std::chrono::steady_clock::now());
  if (next == after_release::delete_node) return false;
  auto w = *next_waiter(m.run);
  h->who = std::move(w.who);
  ++h->local_count;
  if (h->budget.other_seen) ++h->budget.handed_since;
  w.turn->granted = grant_of(h);
  w.done->complete({});
  return true;
}

// Any node in the queue but the hold's own lies behind it (it is first). A
// change of the children seen after the listing counts as one too (a
// contender's create, or its node deleted before it was seen), and so does a
// listing that failed: the bound then starts early, never late.
awaitable<loss> watch_queue(std::shared_ptr<hold> h) {
  auto& s = h->engine->s;
  auto [ec, kids] = co_await s.async_get_children(h->engine->path, as_tuple(use_awaitable));
  if (ec == asio::error::operation_aborted) co_return loss::none;
  bool others = ec || std::any_of(kids.names.begin(), kids.names.end(), [&](const std::string& name) {
                  return name != h->name && parse_lock_node(name);
                });
  if (!others) {
    auto [wait_ec, event] = co_await s.async_wait_children_changed(h->engine->path, kids.stat.cversion,
                                                                   as_tuple(use_awaitable));
    if (wait_ec == asio::error::operation_aborted) co_return loss::none;
  }
  h->budget.other_seen = std::chrono::steady_clock::now();
  asio::steady_timer until_cancelled(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await until_cancelled.async_wait(as_tuple(use_awaitable));
  co_return loss::none;
}

}  // namespace zkasio::detail
