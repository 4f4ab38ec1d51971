// A granted node: its monitor (what fires the lost signal), its grants,
// its release, and a mutex's in-process handoff (mutex_options::local_handoff),
// which is how a release of a hold that leads a local run goes: the lock
// object's contenders take turns under one node, handed over in memory (see
// local_run in engine.hpp, mutex_rule::next_after_release in queue_rule.hpp).
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"

namespace zkasio::detail {

namespace {

void lose(hold& h, loss why) {
  if (why == loss::none) return;
  if (h.released) {
    // Its release's delete may still wait (for the connection): the lock
    // may be lost meanwhile, and the release says so at once; the delete
    // goes on. (Not when the node is gone: that is the delete's own doing,
    // whose answer says how it went.)
    if (why != loss::node_gone)
      if (auto done = std::exchange(h.releasing, nullptr)) done->complete(make_error_code(error::lock_lost));
    return;
  }
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
    report_grant(h, g->granted_at, lock_event::kind::lost);
    g->lost_signal.emit(asio::cancellation_type::terminal);
    g->end_lost_waits({});
  }
}

// Until when the session is sure to live, as far as its replies tell: the
// server cannot expire it before its last sight of it (last_contact) plus
// the timeout; a safety margin before that. The lost signal fires then
// (hold_monitor), and no grant is made after it (session_sure).
std::chrono::steady_clock::time_point sure_until(const engine_state& m) {
  return m.s.last_contact() + m.s.negotiated_timeout() - m.options.safety_margin;
}

}  // namespace

// Whether a grant may be made now. Not past sure_until: the replies that
// decided it may have waited (this process paused, or a reply held up)
// while the server expired the session and granted the next in line. Then
// the acquire asks again once the session's contact is confirmed since
// (session::async_confirm_contact: a sync, and another a tick after its
// answer, which certifies it). Also for reentry: a hold past sure_until
// may be lost, whether or not its monitor has said so yet.
bool session_sure(const engine_state& m) { return std::chrono::steady_clock::now() < sure_until(m); }

bool hold_sure(const hold& h) {
  const auto& m = *h.engine;
  bool connected_enough = m.options.policy != lost_policy::on_suspend || m.s.state() == session_state::connected;
  return !h.lost && m.s.generation() == h.generation && session_sure(m) && connected_enough;
}

// Why no grant can ever be sure (session_sure), if none can: a margin not
// below the timeout less the contact's lag (a confirmed contact is at least
// that old when it is confirmed, but just after a handshake). (Asked when a
// grant was not sure: such a margin would have the acquire look again for
// ever.)
error_code never_sure(const engine_state& m) {
  auto core = m.core.lock();
  auto lag = core ? core->contact_lag() : std::chrono::steady_clock::duration{};
  if (m.options.safety_margin + lag < m.s.negotiated_timeout()) return {};
  return make_error_code(error::invalid_safety_margin);
}

namespace {

// The holder's monitor (hold_watch.hpp decides; this carries it out): what
// fires the lost signal. Until the lock may be lost it watches, all at once,
// the holder's node (deleted, or revoked: Curator's protocol), its session
// (over, closed; disconnected under on_suspend; past sure_until) and, for a
// hold that may lead a local run, the queue behind it; the first loss is
// told (lose). A lock that may be lost while its node may still be there is
// then watched until its node is known gone or its session over, so that
// the waiters behind it learn that (known_nodes). Stopped by the release
// (stop_monitor), once its node is deleted. Not a coroutine: a holder is
// this object and the requests it has pending, each answer dropped once
// the stage it was asked in is over.
class hold_monitor : public std::enable_shared_from_this<hold_monitor> {
 public:
  explicit hold_monitor(std::shared_ptr<hold> h)
      : h_(std::move(h)),
        s_(h_->engine->s),
        timer_(h_->engine->strand),
        session_(h_->generation, true, h_->engine->options.policy),
        version_(h_->version) {}

  // On the strand.
  void start() {
    h_->stop_monitor.slot().assign([weak = weak_from_this()](asio::cancellation_type) {
      if (auto self = weak.lock()) self->end_stage(stage::ended);
    });
    // The node's watch first: the race node's look at its incarnation is
    // sent after it (see check_incarnation).
    watch_node();
    if (h_->name.empty()) check_incarnation();
    state_ = s_.state();
    watch_session();
    if (h_->engine->options.local_handoff && stage_ == stage::watching) watch_queue();
  }

 private:
  enum class stage : std::uint8_t { watching, until_gone, ended };

  // The signals that cancel a stage's requests, one per kind of request
  // (a slot holds one handler). Each stage has its own: a request's
  // completion clears its slot only when it runs, after the next stage may
  // have bound a request to a slot it shared (and that request could then
  // not be cancelled). Its handlers keep it alive.
  struct stops {
    asio::cancellation_signal node, incarnation, session, queue;
  };

  // A handler of the current stage: on the strand, cancelled by its stage's
  // `which` signal. (Cancelled otherwise, operation_aborted: the session
  // object went; its end is the session's watch's to tell.)
  template <class F>
  auto on_strand(asio::cancellation_signal stops::*which, F f) {
    return asio::bind_cancellation_slot(
        ((*stops_).*which).slot(),
        asio::bind_executor(h_->engine->strand, [self = shared_from_this(), stage_stops = stops_, f = std::move(f)](
                                                    error_code ec, auto&&... values) mutable {
          if (stage_stops == self->stops_ && ec != asio::error::operation_aborted)
            f(*self, ec, std::forward<decltype(values)>(values)...);
        }));
  }

  // The node: deleted, or its data changed (read: revoked?), until a loss.
  void watch_node() {
    s_.async_wait_data_changed(h_->node, version_, on_strand(&stops::node, [](hold_monitor& self, error_code ec, event_type event) {
      if (auto why = after_node_event(ec, event)) return self.lost(*why);
      self.read_node();
    }));
  }
  void read_node() {
    s_.async_get_data(h_->node, on_strand(&stops::node, [](hold_monitor& self, error_code ec, node_data data) {
      if (auto why = after_node_read(ec, data.stat.czxid == self.h_->czxid, data.data == revoke_message))
        return self.lost(*why);
      self.version_ = data.stat.version;
      self.watch_node();
    }));
  }
  // The race recipes' node is made again at one path with the same
  // versions: its watch alone cannot tell whether it is on this holder's
  // incarnation. An exists sent after the watch's request (the session
  // sends requests in the order they reach it) that finds the incarnation
  // says the node lived from before the watch was set: the watch is on it.
  void check_incarnation() {
    s_.async_exists(h_->node, on_strand(&stops::incarnation, [](hold_monitor& self, error_code ec,
                                                              std::optional<node_stat> st) {
      if (!ec && (!st || st->czxid != self.h_->czxid)) self.lost(loss::node_gone);
    }));
  }
  // Once the lock may be lost: until its node is gone.
  void wait_node_gone() {
    s_.async_wait_deleted(h_->node, on_strand(&stops::node, [](hold_monitor& self, error_code ec) {
      self.lost(ec ? loss_of(ec) : loss::node_gone);
    }));
  }

  // The session (session_watch decides), at each change of its state and
  // at the sure time it last gave.
  void watch_session() {
    if (!judge_session()) return;
    s_.async_wait_state_change(state_, on_strand(&stops::session, [](hold_monitor& self, error_code ec,
                                                                   session_state next) {
      if (ec) return self.lost(loss_of(ec));
      self.state_ = next;
      self.watch_session();
    }));
  }
  // False once lost; else the timer set to look again.
  bool judge_session() {
    auto verdict = session_.judge({.generation = s_.generation(),
                                   .state = state_,
                                   .now = std::chrono::steady_clock::now(),
                                   .sure_until = sure_until(*h_->engine)});
    if (verdict.why != loss::none) {
      lost(verdict.why);
      return false;
    }
    timer_.expires_at(verdict.look_again);
    timer_.async_wait(asio::bind_executor(h_->engine->strand, [self = shared_from_this(), at = stops_](error_code ec) {
      // (last_contact may have moved meanwhile: look again.)
      if (!ec && at == self->stops_) self->judge_session();
    }));
    return true;
  }

  // Any node in the queue but the hold's own lies behind it (it is first).
  // A change of the children seen after the listing counts as one too (a
  // contender's create, or its node deleted before it was seen), and so
  // does a listing that failed: the bound then starts early, never late.
  void watch_queue() {
    auto& path = h_->engine->path;
    s_.async_get_children(path, on_strand(&stops::queue, [](hold_monitor& self, error_code ec, children kids) {
      bool others = ec || std::any_of(kids.names.begin(), kids.names.end(), [&](const std::string& name) {
                      return name != self.h_->name && parse_lock_node(name);
                    });
      if (others) return self.other_seen();
      self.s_.async_wait_children_changed(self.h_->engine->path, kids.stat.cversion,
                                          self.on_strand(&stops::queue, [](hold_monitor& other, error_code, event_type) {
                                            other.other_seen();
                                          }));
    }));
  }
  void other_seen() { h_->budget.other_seen = std::chrono::steady_clock::now(); }

  // A request's answer or the session says `why`: told; a lock that may
  // be lost is watched on until its node is known gone.
  void lost(loss why) {
    bool watching = stage_ == stage::watching;
    end_stage(watching && why == loss::may_be_lost ? stage::until_gone : stage::ended);
    lose(*h_, why);
    if (stage_ != stage::until_gone) return;
    session_ = session_watch(h_->generation, false, h_->engine->options.policy);
    wait_node_gone();
    watch_session();
  }

  // The requests of the stage that ends are cancelled, their answers dropped.
  void end_stage(stage next) {
    stage_ = next;
    auto ended = std::exchange(stops_, std::make_shared<stops>());
    for (auto* stop : {&ended->node, &ended->incarnation, &ended->session, &ended->queue})
      stop->emit(asio::cancellation_type::terminal);
    timer_.cancel();
  }

  std::shared_ptr<hold> h_;
  session& s_;
  asio::steady_timer timer_;  // the session's sure time
  session_watch session_;
  session_state state_ = session_state::connected;  // as last seen
  std::int32_t version_;                             // the node's data version watched from
  stage stage_ = stage::watching;
  std::shared_ptr<stops> stops_ = std::make_shared<stops>();  // the stage's: a former one's answers are dropped
};

void start_monitor(const std::shared_ptr<hold>& h) { std::make_shared<hold_monitor>(h)->start(); }

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

// Gives one grant's share of `h` back: the last one deletes the node, which
// goes on when `done` is cancelled (operation_aborted at once). lock_lost
// when the lock had been lost, or may be lost while the delete waits: at
// once, the delete going on.
void give_back(const std::shared_ptr<hold>& h, completion_ptr<> done) {
  auto tell = [&done](error_code ec) {
    if (done) done->complete(ec);
  };
  if (--h->grants > 0) return tell(h->lost ? error_code(error::lock_lost) : error_code{});
  if (h->in_run && hand_off(h)) return tell({});
  bool was_lost = h->lost;
  h->released = true;  // the monitor stays until the delete: the delete ends its watch
  // A lock lost already says so at once (its delete may wait for a
  // connection); else the delete's answer tells, or a loss meanwhile (lose).
  if (was_lost) tell(make_error_code(error::lock_lost));
  else h->releasing = std::move(done);
  std::erase_if(h->engine->holds, [&](auto& w) { return w.expired() || w.lock() == h; });
  // (The completion keeps h, and so the name delete_node views.)
  asio::co_spawn(h->engine->strand, delete_node(h->engine, h->name, h->owner_id, h->generation, h->czxid),
                 [h](std::exception_ptr e, error_code ec) {
                   if (e) ec = code_of(e);
                   h->stop_monitor.emit(asio::cancellation_type::terminal);
                   h->turn.reset();  // (a race hold: the next of its session may create the node now)
                   if (auto done = std::exchange(h->releasing, nullptr)) done->complete(ec);
                 });
  // (Its node is behind the one being deleted: it waits for that here.)
  if (std::exchange(h->in_run, false)) pass_lead(h->engine);
}

// Gives one grant's share of `h` back, its node left as it is (async_leave):
// the last one ends the hold (its monitor, its turn on the path).
void leave(const std::shared_ptr<hold>& h, completion_ptr<> done) {
  if (--h->grants == 0) {
    h->released = true;
    std::erase_if(h->engine->holds, [&](auto& w) { return w.expired() || w.lock() == h; });
    h->stop_monitor.emit(asio::cancellation_type::terminal);
    h->turn.reset();
  }
  done->complete({});
}

// The attempt's node, held from now on: monitored, released by its grants.
// A race attempt's turn goes to the hold (released once its node is deleted).
lock granted(const std::shared_ptr<engine_state>& m, attempt&& a, std::optional<owner> who) {
  auto h = std::make_shared<hold>();
  h->engine = m;
  h->name = std::move(a.node.name);
  h->node = m->full(h->name);
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

// ------------------------------------- a node of the user's own recipe

namespace {

// The user's node as checked: held from then on.
struct own_node {
  node_stat stat;
  std::uint64_t generation = 0;                // of the session that owns it
  std::shared_ptr<local_turns::turn> turn{};  // the session's on the path
};

// Whether the engine's node may be held (own_node_refusal), asked after a
// sync so that its answer is the leader's, until the session is sure
// (session_sure) when the answer comes. First the session's turn on the
// path (local_turns.hpp), as a race recipe's contender takes it: while a
// contender of the session, or another hold of the node, has it, lock_busy;
// while this one has it, none of them makes or deletes a node there.
awaitable<std::tuple<error_code, own_node>> check_own_node(std::shared_ptr<engine_state> m) {
  auto& s = m->s;
  auto refused = [](error_code ec) { return std::make_tuple(ec, own_node{}); };
  auto [synced] = co_await s.async_sync(m->path, as_tuple(use_awaitable));  // (connected from here)
  if (synced) co_return refused(synced);
  auto generation = s.generation();
  auto turn = m->turns->try_take({m->core, generation});
  if (!turn) co_return refused(code(error::lock_busy));
  for (;;) {
    auto [ec, stat] = co_await s.async_exists(m->path, as_tuple(use_awaitable));
    if (ec) co_return refused(ec);
    // (The session clears its id before it counts the next generation.)
    auto id = s.id();
    if (s.generation() != generation || id == 0) co_return refused(code(zk_error::session_expired));
    if (auto refusal = own_node_refusal(stat, id)) co_return refused(refusal);
    if (session_sure(*m)) co_return std::make_tuple(error_code{}, own_node{*stat, generation, std::move(turn)});
    if (auto never = never_sure(*m)) co_return refused(never);
    // (A sync's answer alone would not move last_contact: a follower's
    // answer is certified only by another a tick later, contact_tracker.hpp.)
    auto [again] = co_await s.async_confirm_contact(as_tuple(use_awaitable));
    if (again) co_return refused(again);
  }
}

// The hold made of a checked node, as the check completes (through
// completion_as: a check that completes after a cancellation makes none, so
// the node stays the user's, untouched).
struct hold_checked_node {
  std::shared_ptr<engine_state> m;
  lock operator()(error_code ec, own_node node) const {
    if (ec) return {};
    // Held as a race recipe's node is: the node at the engine's path (an
    // empty name), checked to be the incarnation seen (its czxid).
    attempt a;
    a.generation = node.generation;
    a.stat = node.stat;
    a.turn = std::move(node.turn);
    report(m->options, m->path, lock_event::kind::granted, m->path, {});
    return granted(m, std::move(a), std::nullopt);
  }
};

}  // namespace

void start_hold_node(session& s, std::string node, lock_options options, lock_strand strand,
                     completion_ptr<lock> done) {
  std::shared_ptr<engine_state> m;
  try {
    m = make_engine(s, node, std::move(options), queue_family::race, strand, true);
  } catch (const system_error& e) {  // (invalid_path)
    return asio::dispatch(strand, [done, ec = e.code()] { done->complete(ec, lock{}); });
  }
  start_spawned(m->strand, check_own_node(m), completion_through<own_node>(done, hold_checked_node{m}));
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

}  // namespace zkasio::detail
