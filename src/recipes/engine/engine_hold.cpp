// A granted node: its monitor (what fires the lost signal), its grants,
// its release, and a mutex's in-process handoff (lock_options::local_handoff),
// which is how a release of a hold that leads a local run goes: the lock
// object's contenders take turns under one node, handed over in memory (see
// local_run in engine.hpp, mutex_rule::next_after_release in queue_rule.hpp).
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"

namespace zkasio::detail {

namespace {

void lose(hold& h, loss why) {
  if (why == loss::none || h.released) return;
  if (why == loss::node_gone || why == loss::session_over) h.engine->known->gone(h.name);
  if (h.lost.exchange(true)) return;
  // Its local run goes on under a node of its own, as a waiter behind a node
  // lost would (the holder is told to stop); if its lock is being handed
  // over, by the waiter it goes to (run_ticket).
  if (!h.handing && std::exchange(h.in_run, false)) pass_lead(h.engine);
  // A handler may release its own grant (and so edit the list) as it runs.
  std::vector<std::shared_ptr<grant>> grants;
  for (auto& weak : h.grant_list)
    if (auto g = weak.lock()) grants.push_back(std::move(g));
  for (auto& g : grants) {
    g->lost_signal.emit(asio::cancellation_type::terminal);
    g->end_lost_waits({});
  }
}

}  // namespace

// Completes with true as soon as the node at `path` is not the incarnation
// `czxid` (gone, or made again), else waits until cancelled (false). Sent
// just after a watch's request on the path (the session sends requests in
// the order they reach it; `||` starts its left operand first): finding
// `czxid` there means that node lived from before the watch was set until
// this answer, so the watch is on it. (The race recipes' node is made again
// at one path with the same versions: its watch alone cannot tell; nor can a
// parent's children watch once the parent was made again.)
awaitable<bool> other_incarnation(session& s, std::string path, std::int64_t czxid) {
  auto [ec, st] = co_await s.async_exists(path, as_tuple(use_awaitable));
  if (!ec && (!st || st->czxid != czxid)) co_return true;
  asio::steady_timer until_cancelled(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await until_cancelled.async_wait(as_tuple(use_awaitable));
  co_return false;
}

namespace {

// Watches the holder's node: deleted, or revoked (Curator's protocol); what
// each answer means is hold_watch's.
awaitable<loss> watch_node(std::shared_ptr<hold> h) {
  auto& s = h->engine->s;
  auto version = h->version;
  for (bool first = true;; first = false) {
    std::error_code ec;
    event_type event{};
    if (first && h->name.empty()) {  // a race node: is the watch on this holder's?
      auto raced = co_await (s.async_wait_data_changed(h->node, version, as_tuple(use_awaitable)) ||
                             other_incarnation(s, h->node, h->czxid));
      if (raced.index() == 1) co_return std::get<1>(raced) ? loss::node_gone : loss::none;
      std::tie(ec, event) = std::get<0>(raced);
    } else {
      std::tie(ec, event) = co_await s.async_wait_data_changed(h->node, version, as_tuple(use_awaitable));
    }
    if (ec == asio::error::operation_aborted) co_return loss::none;
    if (auto why = after_node_event(ec, event)) co_return *why;
    auto [read_ec, data] = co_await s.async_get_data(h->node, as_tuple(use_awaitable));
    if (read_ec == asio::error::operation_aborted) co_return loss::none;
    if (auto why = after_node_read(read_ec, data.stat.czxid == h->czxid, data.data == revoke_message)) co_return *why;
    version = data.stat.version;
  }
}

// The holder's node is gone: deleted, or its session over.
awaitable<loss> node_gone(std::shared_ptr<hold> h) {
  auto [ec] = co_await h->engine->s.async_wait_deleted(h->node, as_tuple(use_awaitable));
  if (ec == asio::error::operation_aborted) co_return loss::none;
  co_return ec ? loss_of(ec) : loss::node_gone;
}

// Until when the session is sure to live, as far as its replies tell: the
// server cannot expire it before its last sight of it (last_contact) plus
// the timeout; a safety margin before that. The lost signal fires then
// (watch_session), and no grant is made after it (session_sure).
std::chrono::steady_clock::time_point sure_until(const engine_state& m) {
  return m.s.last_contact() + m.s.negotiated_timeout() - m.options.safety_margin;
}

}  // namespace

// Whether a grant may be made now. Not past sure_until: the replies that
// decided it may have waited (this process paused, or a reply held up)
// while the server expired the session and granted the next in line. Then
// the acquire asks again after a sync sent now: its answer, which comes
// through the leader, moves last_contact (a read's answer does not: a
// follower answers reads alone). Also for reentry: a hold past sure_until
// may be lost, whether or not its monitor has said so yet.
bool session_sure(const engine_state& m) { return std::chrono::steady_clock::now() < sure_until(m); }

bool hold_sure(const hold& h) {
  const auto& m = *h.engine;
  bool connected_enough = m.options.policy != lost_policy::on_suspend || m.s.state() == session_state::connected;
  return !h.lost && m.s.generation() == h.generation && session_sure(m) && connected_enough;
}

// Why no grant can ever be sure (session_sure), if none can: a margin not
// below the timeout. (Asked when a grant was not sure: such a margin would
// have the acquire look again for ever.)
std::error_code never_sure(const engine_state& m) {
  if (m.options.safety_margin < m.s.negotiated_timeout()) return {};
  return make_error_code(error::invalid_safety_margin);
}

namespace {

// Watches the holder's session (hold_watch's session_watch decides): over,
// or closed; with `deadlines`, also disconnected under on_suspend, or past
// sure_until.
awaitable<loss> watch_session(std::shared_ptr<hold> h, std::uint64_t generation, bool deadlines) {
  auto& s = h->engine->s;
  session_watch watch(generation, deadlines, h->engine->options.policy);
  asio::steady_timer deadline(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  auto state = s.state();
  for (;;) {
    auto verdict = watch.judge(
        {.generation = s.generation(), .state = state, .now = std::chrono::steady_clock::now(), .sure_until = sure_until(*h->engine)});
    if (verdict.why != loss::none) co_return verdict.why;
    deadline.expires_at(verdict.look_again);
    auto change = co_await (s.async_wait_state_change(state, as_tuple(use_awaitable)) ||
                            deadline.async_wait(as_tuple(use_awaitable)));
    if (change.index() == 1) {
      if (std::get<0>(std::get<1>(change)) == asio::error::operation_aborted) co_return loss::none;
      continue;  // last_contact may have moved meanwhile: look again
    }
    auto [ec, next] = std::get<0>(change);
    if (ec == asio::error::operation_aborted) co_return loss::none;
    if (ec) co_return loss_of(ec);
    state = next;
  }
}

template <class... Losses>
loss either(std::variant<Losses...> why) {
  return std::visit([](loss l) { return l; }, why);
}

// Watches what can take the lock away, until released: once the lock may be
// lost (its node possibly still there), until its node is known gone, so
// that the waiters behind it learn that (see known_nodes).
awaitable<void> monitor(std::shared_ptr<hold> h) {
  auto generation = h->generation;
  loss why{};
  // A hold that may lead a local run also watches for another contender
  // queued behind it.
  if (h->engine->options.local_handoff) why = either(co_await (watch_node(h) || watch_session(h, generation, true) || watch_queue(h)));
  else why = either(co_await (watch_node(h) || watch_session(h, generation, true)));
  lose(*h, why);
  if (why == loss::may_be_lost) lose(*h, either(co_await (node_gone(h) || watch_session(h, generation, false))));
}

void start_monitor(const std::shared_ptr<hold>& h) {
  // The handler keeps the hold (and so its signals) alive until the monitor
  // has let go of the slot.
  asio::co_spawn(h->engine->strand, monitor(h),
                 asio::bind_cancellation_slot(h->stop_monitor.slot(), [h](std::exception_ptr) {}));
}

}  // namespace

// A new lock object sharing `h`.
lock grant_of(const std::shared_ptr<hold>& h) {
  auto g = std::make_shared<grant>();
  g->held = h;
  g->local = h->local_count;
  ++h->grants;
  std::erase_if(h->grant_list, [](auto& weak) { return weak.expired(); });
  h->grant_list.push_back(g);
  return lock(std::move(g), h->engine);
}

// Gives one grant's share of `h` back: the last one deletes the node (in the
// background, so that it goes on when this wait is cancelled: then
// operation_aborted). lock_lost when the lock had been lost.
awaitable<std::error_code> give_back(std::shared_ptr<hold> h) {
  if (--h->grants > 0) co_return h->lost ? make_error_code(error::lock_lost) : std::error_code{};
  if (h->in_run && hand_off(h)) co_return std::error_code{};
  bool was_lost = h->lost;
  h->released = true;  // the monitor stays until the delete: the delete ends its watch
  std::erase_if(h->engine->holds, [&](auto& w) { return w.expired() || w.lock() == h; });
  background<std::error_code> deleting(h->engine->strand, [](std::shared_ptr<hold> h) -> awaitable<std::error_code> {
    auto ec = co_await delete_node(h->engine, h->name, h->owner_id, h->czxid);
    h->stop_monitor.emit(asio::cancellation_type::terminal);
    h->turn.reset();  // (a race hold: the next of its session may create the node now)
    co_return ec;
  }(h));
  // (Its node is behind the one being deleted: it waits for that here.)
  if (std::exchange(h->in_run, false)) pass_lead(h->engine);
  auto result = co_await deleting.wait();
  if (!result) co_return std::error_code(asio::error::operation_aborted);
  if (!*result && was_lost) co_return make_error_code(error::lock_lost);
  co_return *result;
}

// The attempt's node, held from now on: monitored, released by its grants.
// A race attempt's turn goes to the hold (released once its node is deleted).
lock granted(const std::shared_ptr<engine_state>& m, attempt& a, std::optional<owner> who) {
  auto h = std::make_shared<hold>();
  h->engine = m;
  h->name = a.node.name;
  h->node = m->full(a.node.name);
  h->kind = a.kind;
  h->czxid = a.stat.czxid;
  h->token = a.downgrade_of ? a.downgrade_token : a.stat.czxid;
  h->version = a.stat.version;
  h->owner_id = a.stat.ephemeral_owner;
  h->who = who;
  h->turn = std::move(a.turn);
  h->generation = a.generation;
  m->holds.push_back(h);
  auto first = grant_of(h);
  start_monitor(h);
  return first;
}

// ------------------------------------------------- the in-process handoff

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

run_lead run_lead::taken_from(std::shared_ptr<engine_state> m, hold& h, lock handed) {
  bool led = std::exchange(h.in_run, false);
  handed = {};  // released: its node deleted, nothing handed on
  return led ? run_lead(std::move(m)) : run_lead{};
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
  next->ticket->handed_hold = h;
  h->handing = true;
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
