// A mutex's in-process handoff (lock_options::local_handoff): the lock
// object's contenders take turns under one node, handed over in memory
// (see local_run in engine.hpp, mutex_rule::next_after_release in queue_rule.hpp).
#include "engine.hpp"

namespace zkasio::detail {

namespace {

// The next waiter, taken out of the line. (A cancelled one leaves it at once:
// none is skipped but as a safeguard.)
std::optional<local_run::waiter> next_waiter(local_run& run) {
  while (!run.waiting.empty()) {
    auto w = std::move(run.waiting.front());
    run.waiting.pop_front();
    if (!w.done->done()) return w;
  }
  return std::nullopt;
}

}  // namespace

run_lead& run_lead::operator=(run_lead&& other) noexcept {
  if (this != &other) {
    run_lead dropped(std::move(*this));
    m_ = std::move(other.m_);
  }
  return *this;
}

run_lead::~run_lead() {
  if (m_) pass_lead(m_);
}

void run_lead::hand_to(const lock& held) {
  if (!m_) return;
  for (auto& weak : m_->holds)
    if (auto h = weak.lock(); h && h->node == held.node() && hold_sure(*h)) {
      h->in_run = true;
      m_.reset();
      return;
    }
}

void pass_lead(const std::shared_ptr<engine_state>& m) {
  auto next = next_waiter(m->run);
  m->run.active = next.has_value();
  if (!next) return;
  next->ticket->lead = run_lead(m);
  next->done->complete({});
}

bool hand_off(const std::shared_ptr<hold>& h) {
  auto& m = *h->engine;
  const auto& bound = *m.options.local_handoff;
  auto next = next_waiter(m.run);
  if (mutex_queue.next_after_release(h->budget, bound.max_run, bound.max_time, next.has_value(), hold_sure(*h),
                         std::chrono::steady_clock::now()) == after_release::delete_node) {
    if (next) m.run.waiting.push_front(std::move(*next));
    return false;
  }
  h->who = std::move(next->who);
  ++h->local_count;
  if (h->budget.other_seen) ++h->budget.handed_since;
  next->ticket->handed = grant_of(h);
  next->done->complete({});
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
