#include "recipes/engine/acquire_runner.hpp"

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/dispatch.hpp>
#include <asio/steady_timer.hpp>

#include "recipes/machines/acquire_flow.hpp"
#include "recipes/engine/engine_acquire.hpp"
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"
#include "recipes/engine/machine_run.hpp"
#include "recipes/engine/race_run.hpp"
#include "recipes/machines/fair_acquire.hpp"

namespace zkasio::detail {

namespace {

// The session and the known nodes, as fair_acquire asks of them.
class engine_world final : public acquire_world {
 public:
  explicit engine_world(engine_state& m) : m_(m) {}
  std::uint64_t generation() const override { return m_.s.generation(); }
  std::int64_t session_id() const override { return m_.s.id(); }
  bool connected() const override { return m_.s.state() == session_state::connected; }
  std::uint64_t connection() const override {
    auto core = m_.core.lock();
    return core ? core->connections() : 0;
  }
  bool awaiting_server() const override { return detail::awaiting_server(m_.s); }
  bool sure() const override { return session_sure(m_); }
  error_code never_sure() const override { return detail::never_sure(m_); }
  bool here(std::string_view name, std::uint64_t generation) const override {
    return m_.known->owned_by(name, m_.session_in(generation));
  }
  below_result below(const lock_node& mine, std::string_view exempt) override {
    auto found = m_.known->below(mine, exempt);
    switch (found.what) {
      case known_nodes::below_result::first: return {};
      case known_nodes::below_result::relist: return {below_result::relist, std::move(found.name)};
      case known_nodes::below_result::node: break;
    }
    return {below_result::node, std::move(found.name)};
  }
  void gone(std::string_view name) override { m_.known->gone(name); }
  void add(const lock_node& node, std::uint64_t generation, std::string_view beside) override {
    m_.known->add(node, m_.session_in(generation), beside);
  }
  std::shared_ptr<const queue_view> view(std::vector<lock_node> prefix) const override {
    return std::make_shared<const queue_view>(m_.known->view(std::move(prefix)));
  }

 private:
  engine_state& m_;
};

// Sends the create of `a`'s node. Its completion adopts the node (known_nodes)
// before the completion of any listing sent after it runs, so that listing's
// view counts the node as known. That order holds because (1) the session
// submits requests in the order they reach its strand, and the listing is
// submitted after the create (next_listing); (2) a session's replies come in
// the order of its requests and the C client completes them in that order
// (session_impl), a request submitted while no server is connected waiting
// in that order too (parked_requests); (3) each completion is posted, never
// run inline, to the handler's executor (completion.hpp); (4) both handlers
// are bound to this lock object's strand, which runs what is posted to it in
// order. test_session_threads's "completions of one session run in the order
// of its requests" breaks if any of these changes.
std::shared_ptr<create_reply> send_create(const std::shared_ptr<engine_state>& m, const fair_acquire& fsm,
                                          const std::string& data) {
  auto reply = std::make_shared<create_reply>();
  const auto& who = fsm.who();
  auto name = lock_node_prefix(who.uuid, who.kind);
  create_options mode(create_mode::ephemeral_sequential, node_acl(*m));
  if (who.downgrade_of) {
    auto write = lock_name(node_kind::write);
    name += who.downgrade_of->substr(who.downgrade_of->find(write) + write.size());  // its sequence
    mode.mode = create_mode::ephemeral;
  }
  // Pinned to the session the create was decided in: the machine read its
  // generation here, on this strand; the session's strand, where it goes
  // next, may be in the next session by then (and its node, in no
  // contender's sight, would then stand in the queue: wedged).
  m->s.pinned(fsm.generation()).async_create(m->full(name), data, std::move(mode),
                     asio::bind_executor(m->strand, [m, reply, owner = m->session_in(fsm.generation()),
                                                     beside = std::string(fsm.exempt())](error_code ec,
                                                                                         created made) {
                       reply->done = true;
                       reply->ec = ec;
                       if (ec) return;
                       auto name = std::string_view(made.path).substr(m->path.size() + 1);
                       reply->stat = made.stat;
                       if (auto key = parse_lock_node_key(name)) {
                         made.path.erase(0, m->path.size() + 1);  // (the name, in the path's storage)
                         reply->node = {std::move(made.path), key->kind, key->sequence};
                         if (!reply->abandoned) m->known->add(reply->node, owner, beside);
                       } else {  // the server named it as no server does: delete it by name
                         reply->node.name = std::string(name);
                         reply->ec = make_error_code(error::unexpected_reply);
                       }
                     }));
  return reply;
}

// Runs one fair_acquire after another on the session: what acquire_op and
// node_op share. Carries each action out, with the reply bound to the
// strand and to the pending request's signal (stop() cancels it), and feeds
// it back in; a reply of an earlier attempt (stopped) is dropped.
class contender_run : public machine_run<contender_run>, public known_nodes::gone_waiter {
 public:
  explicit contender_run(std::shared_ptr<engine_state> m) : machine_run(std::move(m)) {}

  // The node waited for in this process is gone (known_nodes, from any
  // thread): fed in on the strand unless that wait was stopped.
  void node_gone(std::uint32_t token) override {
    asio::post(m_->strand, [self = shared_from_this(), token] {
      if (token != self->runs_ || !self->waiting_here_) return;
      self->waiting_here_ = false;
      self->resume(fair_acquire::gone{});
    });
  }

 protected:
  friend class machine_run<contender_run>;

  // Starts a new attempt of `who`.
  void run(fair_acquire::contender who) {
    fsm_.emplace(std::move(who));
    reply_.reset();
    ++runs_;
    engine_world world(*m_);
    act(fsm_->start(world));
  }
  // An acquire's next attempt (acquire_op): a new node.
  void start_attempt(const acquire_request& request, std::optional<std::string> downgrade_of) {
    run({.kind = request.kind,
         .uuid = make_uuid(),
         .downgrade_of = std::move(downgrade_of),
         .confirm_owner = request.confirm_owner,
         .one_look = request.try_once});
  }
  bool running() const { return fsm_ && !fsm_->finished(); }
  std::uint64_t attempt_generation() const { return fsm_->generation(); }
  // Ends the attempt where it stands: its pending request cancelled, a
  // create's reply still to come not adopted (the attempt's removal finds
  // its node), later replies dropped.
  void stop() {
    if (!running()) return;
    fsm_->abort();
    if (reply_ && !reply_->done) reply_->abandoned = true;
    stop_pending();
    stop_own_watch();
    stop_local_wait();
  }
  // The attempt as the engine's other parts take it (the hold it becomes,
  // or its removal), written into `a`.
  void write_into(attempt& a) const { write_into(a, fsm_->node()); }
  void write_into(attempt& a, lock_node node) const {
    const auto& who = fsm_->who();
    a.kind = who.kind;
    a.uuid = who.uuid;
    a.downgrade_of = who.downgrade_of;
    a.generation = fsm_->generation();
    a.submitted = fsm_->submitted();
    a.gone = fsm_->node_gone();
    a.node = std::move(node);
    a.stat = fsm_->stat();
    a.reply = reply_;
  }
  // The attempt, over (granted, failed or stopped): its node moves out of
  // the state machine, which is read no more.
  attempt take_attempt() {
    attempt a;
    write_into(a, fsm_->take_node());
    return a;
  }
  // A failed or stopped attempt's node goes, in the background.
  std::vector<background<error_code>> discard_attempt() { return discard(m_, {take_attempt()}); }
  // The attempt ended: granted (no error; write_into says its node), or failed.
  virtual void ended(error_code ec) = 0;
  // What its node holds.
  virtual const std::string& node_data() const = 0;
  // A create was sent (it may take effect): for a caller that removes it.
  virtual void sent_create() {}

  std::optional<fair_acquire> fsm_;
  std::shared_ptr<create_reply> reply_;  // of its latest create, until answered and fed in

 private:
  void resume(fair_acquire::event e) {
    engine_world world(*m_);
    act(fsm_->resume(std::move(e), world));
    // A create answered is the state machine's now (its node, its stat): a
    // waiter keeps no copy (only an unanswered one tells a removal to look).
    if (reply_ && reply_->done) reply_.reset();
  }

  void act(fair_acquire::action next) {
    using fa = fair_acquire;
    if (std::holds_alternative<fa::keep_waiting>(next)) return;
    // The own node's watch lives while the acquire waits; past a grant too,
    // where the holder's monitor shares it (one watch per node and kind).
    if (!std::holds_alternative<fa::wait_gone>(next) && !std::holds_alternative<fa::grant>(next)) stop_own_watch();
    // A wait in this process ends with any next step (its own node's watch
    // may end it first: lock_lost), lest its entry keep this runner and tell
    // it of a wait it no longer has.
    stop_local_wait();
    if (auto* c = std::get_if<fa::connect>(&next))
      return connect(c->after, [](error_code ec) -> fa::event { return fa::connected{ec}; });
    if (std::holds_alternative<fa::create_and_list>(next)) return create_and_list();
    if (std::holds_alternative<fa::list>(next)) return list();
    if (std::holds_alternative<fa::sync>(next))
      return m_->s.async_sync(m_->path, reply([](error_code ec) -> fa::event { return fa::synced{ec}; }));
    if (std::holds_alternative<fa::confirm>(next))
      return m_->s.async_confirm_contact(reply([](error_code ec) -> fa::event { return fa::confirmed{ec}; }));
    if (auto* l = std::get_if<fa::look_up>(&next))
      return m_->s.async_exists(m_->full(l->name), reply([](error_code ec, std::optional<node_stat> st) -> fa::event {
                                  return fa::looked_up{ec, st};
                                }));
    if (std::holds_alternative<fa::make_parents>(next)) {
      // (Parents are shared containers: nothing to undo when stopped.)
      return spawn(create_parents(*m_, m_->path, fsm_->generation()),
                   [](error_code ec) -> fa::event { return fa::parents_made{ec}; });
    }
    if (auto* w = std::get_if<fa::wait_gone>(&next)) {
      if (w->watch_own) watch_own();
      return wait_gone(w->name, w->here);
    }
    // Ended by its own node's watch, it may still wait on the server for its
    // predecessor: that wait goes (it would hold this runner, and a watch,
    // until the predecessor went).
    pending_.stop();
    auto* failed = std::get_if<fa::fail>(&next);
    ended(failed ? failed->ec : error_code{});
  }

  // A reply of the own node's watch: fed in unless the watch was stopped.
  template <class MakeEvent>
  auto own_reply(pending_request& request, MakeEvent make_event) {
    return request.bind(m_->strand, [self = shared_from_this(), runs = runs_, own = own_runs_,
                                     make_event = std::move(make_event)](auto&&... values) mutable {
      if (runs != self->runs_ || own != self->own_runs_ || !self->running()) return;
      self->resume(make_event(std::forward<decltype(values)>(values)...));
    });
  }

  // A watch on its own node, then an exists of it: sent after that watch's
  // request (the session sends requests in the order they reach its strand,
  // and sets the watches waiting for a connection before it sends the
  // requests that waited), so an answer that it is there says the watch is
  // on it. Requests of their own: the pending request is the
  // predecessor's. A watch of before (kept across a lost connection, its
  // check failed) goes first: one slot holds one request.
  void watch_own() {
    stop_own_watch();
    auto own = m_->full(fsm_->node().name);
    m_->s.async_wait_deleted(own, own_reply(own_watch_, [](error_code ec) -> fair_acquire::event {
                               return fair_acquire::own_gone{ec};
                             }));
    m_->s.async_exists(own, own_reply(own_check_, [](error_code ec, std::optional<node_stat> st) -> fair_acquire::event {
                         return fair_acquire::own_checked{ec, st};
                       }));
  }
  void stop_own_watch() {
    ++own_runs_;
    own_watch_.stop();
    own_check_.stop();
  }

  void create_and_list() {
    auto created = reply_ = send_create(m_, *fsm_, node_data());
    sent_create();
    listen(next_listing(m_), [created](error_code ec, std::shared_ptr<const queue_view> view) -> fair_acquire::event {
      // (The node is the state machine's from now on: moved, not copied.)
      return fair_acquire::created_and_listed{
          created->done, created->ec, std::move(created->node), created->stat, ec, std::move(view)};
    });
  }

  void list() {
    listen(next_listing(m_), [](error_code ec, std::shared_ptr<const queue_view> view) -> fair_acquire::event {
      return fair_acquire::listed{ec, std::move(view)};
    });
  }

  // Waits for `round`'s reply, then feeds make_event(its error, its view) in.
  template <class MakeEvent>
  void listen(std::shared_ptr<listing_round> round, MakeEvent make_event) {
    // (Cancelled: the attempt is over, and the reply dropped.)
    round->ready.async_wait(reply([round, make_event](error_code) { return make_event(round->ec, round->view); }));
  }

  // Waits for `name` to go: in this process when it is a node of the same
  // session (known_nodes: an entry of a few bytes, told by node_gone), else
  // with a watch on the server.
  void wait_gone(const std::string& name, bool here) {
    if (!here)
      return m_->s.async_wait_deleted(m_->full(name), reply([](error_code ec) -> fair_acquire::event {
                                        return fair_acquire::gone{ec};
                                      }));
    waiting_here_ = true;
    m_->known->wait_gone(name, std::static_pointer_cast<gone_waiter>(shared_from_this()), runs_);
  }
  void stop_local_wait() {
    if (std::exchange(waiting_here_, false)) m_->known->forget_wait(fsm_->predecessor(), this);
  }

  pending_request own_watch_, own_check_;  // the own node's watch and its exists
  std::uint32_t own_runs_ = 0;  // counts the own node's watches stopped: their late replies are dropped
  bool waiting_here_ = false;   // on a node of its session, in this process (wait_gone)
};

// One acquire of a lock recipe (start_acquire), from the caller's operation
// to its completion `done_`: acquire_flow's runner, and the runner of each
// of its attempts, `Attempts`: contender_run (fair_acquire: the fair queues)
// or race_run (race_acquire: the race recipes), which provides
// start_attempt, running, stop, take_attempt, discard_attempt and
// attempt_generation, and calls ended(error) when an attempt ends.
template <class Attempts>
class acquire_op final : public Attempts {
 public:
  acquire_op(std::shared_ptr<engine_state> m, acquire_request request, completion_ptr<lock> done)
      : Attempts(std::move(m)), request_(std::move(request)), done_(std::move(done)) {}

  // On the strand.
  void begin() {
    if (done_->done()) return;  // cancelled before it ran: nothing made
    report(this->m_->options, this->m_->path, lock_event::kind::acquiring, {}, {});
    deadline_ = arm_stops(this->m_, *done_, request_.deadline, [weak = weak()](error_code ec) {
      if (auto self = weak.lock()) self->stop_with(ec);
    });
    auto found = request_.who ? reentry_of(*this->m_, *request_.who, request_.kind) : reentry{};
    flow_ = acquire_flow({.try_once = request_.try_once,
                          .local_run = this->m_->options.local_handoff.has_value(),
                          .requeue_on_expiry = this->m_->options.requeue_on_expiry,
                          .holds = reentry_with(found)});
    carry_out(flow_.start(look()), found.h);
  }

 private:
  std::weak_ptr<acquire_op> weak() { return std::static_pointer_cast<acquire_op>(this->shared_from_this()); }

  const std::string& node_data() const override { return request_.data ? *request_.data : this->m_->options.data; }

  // The owner's hold found (reentry_of), as the flow takes it; a
  // downgrade keeps its grant's fencing token.
  acquire_flow::reentry reentry_with(const reentry& found) {
    using r = acquire_flow::reentry;
    switch (found.what) {
      case reentry::none: return r::none;
      case reentry::again: return r::again;
      case reentry::lost: return r::lost;
      case reentry::deadlock: return r::deadlock;
      case reentry::downgrade:
        downgrade_token_ = found.h->token;
        return r::downgrade;
    }
    return r::none;
  }

  acquire_flow::look look() const {
    auto state = this->m_->s.state();
    return {.generation = this->m_->s.generation(),
            .connected = state == session_state::connected,
            .expired = state == session_state::expired,
            .closed = state == session_state::closed,
            .run_active = this->m_->run.active};
  }

  void feed(const acquire_flow::event& e) { carry_out(flow_.resume(e, look())); }

  // `next`. `found`: the owner's hold found at the start, granted again or
  // downgraded (a downgrade is never attempted again: its one attempt is
  // the start's, which takes the write node's sequence from it).
  // `removing`: the failed attempt's node, going (lock_busy waits for it).
  void carry_out(acquire_flow::action next, const std::shared_ptr<hold>& found = nullptr,
                 std::vector<background<error_code>> removing = {}) {
    using af = acquire_flow;
    follow_lead(next);
    if (std::holds_alternative<af::attempt>(next)) {
      return this->start_attempt(request_, flow_.downgrade() && found ? std::optional(found->name) : std::nullopt);
    }
    if (std::holds_alternative<af::wait_in_run>(next)) return join_line();
    if (std::holds_alternative<af::connect>(next))
      return this->m_->s.async_connect(connecting_.bind(this->m_->strand, [self = this->shared_from_this()](error_code ec) {
        static_cast<acquire_op&>(*self).feed(af::connected{ec});
      }));
    if (std::holds_alternative<af::keep_waiting>(next)) return;
    if (std::holds_alternative<af::granted_again>(next)) return complete({}, grant_of(found));
    if (std::holds_alternative<af::take_handed>(next)) return complete({}, std::move(std::exchange(ticket_, nullptr)->handed));
    if (std::holds_alternative<af::pass_on>(next)) return ticket_.reset();  // (its lock, its lead: to the next)
    if (std::holds_alternative<af::granted>(next)) {
      auto a = this->take_attempt();
      a.downgrade_token = downgrade_token_;
      auto held = granted(this->m_, std::move(a), request_.who);
      lead_.hand_to(held);
      lead_ = {};  // (not given to a hold that may be lost already: it goes on)
      return complete({}, std::move(held));
    }
    auto& failed = std::get<af::fail>(next);
    if (!failed.after_removal) return complete(failed.ec);
    after_removal(this->m_, std::move(removing), failed.ec, [self = this->shared_from_this()](error_code ec) {
      static_cast<acquire_op&>(*self).complete(ec);
    });
  }

  // An attempt failed: its node goes (in the background) before the flow
  // decides what follows.
  void ended(error_code ec) override {
    auto removing = ec ? this->discard_attempt() : std::vector<background<error_code>>{};
    auto next = flow_.resume(acquire_flow::attempt_ended{ec, this->attempt_generation()}, look());
    carry_out(std::move(next), nullptr, std::move(removing));
  }

  // The deadline, or the caller's cancellation: what runs stops where it
  // stands (an attempt's node goes in the background; a wait in the run
  // leaves its line).
  void stop_with(error_code ec) {
    if (flow_.finished()) return;
    bool attempting = flow_.attempting(), waiting = flow_.waiting_in_run();
    auto next = flow_.resume(acquire_flow::stopped{ec}, look());
    // (A wait for the connection goes too: it would keep this object, and
    // the engine, until a server answers.)
    connecting_.stop();
    if (waiting)
      if (auto wait = run_wait_.lock()) wait->cancel();
    if (attempting && this->running()) {
      this->stop();
      this->discard_attempt();
    }
    carry_out(next);
  }

  void complete(error_code ec, lock held = {}) {
    if (deadline_) deadline_->cancel();
    report_outcome(*this->m_, started_, ec, std::span<const lock>(&held, ec ? 0 : 1));
    done_->complete(ec, std::move(held));
  }

  // Waits in the local run's line (see local_run in engine.hpp) until
  // handed the lock or the lead, each in the ticket.
  void join_line() {
    ticket_ = std::make_shared<run_ticket>();
    // (The line holds the wait, and the wait this acquire.)
    // (Cancelled, as the acquire stops: nothing was handed over.)
    auto wait = make_completion<>(asio::bind_executor(this->m_->strand, [self = this->shared_from_this()](error_code ec) {
                                    if (!ec) static_cast<acquire_op&>(*self).handed();
                                  }),
                                  this->m_->strand, this->m_->strand, read_cancellation);
    // A waiter that leaves, leaves the line at once (the line may be long).
    wait->on_cancel = [&waiting = this->m_->run.waiting, raw = wait.get()] {
      std::erase_if(waiting, [&](const local_run::waiter& w) { return w.done.get() == raw; });
    };
    run_wait_ = wait;
    this->m_->run.waiting.push_back({std::move(wait), request_.who, ticket_});
  }

  // Handed the lock, or the lead, by the run. Stopped between the hand-over
  // and now (a deadline or a cancellation queued on the strand ahead of this
  // completion, as a process paused past both finds them on waking), it no
  // longer leads, and follow_lead has passed a lead it was handed on with
  // its ticket: nothing is left to take, and the flow, finished, says so.
  void handed() {
    auto h = ticket_ && !ticket_->lead.leads() ? ticket_->handed_hold.lock() : nullptr;
    if (h) h->handing = false;  // (taken, or passed on: its loss passes the lead again)
    feed(acquire_flow::handed{.lock = h != nullptr, .generation = h ? h->generation : 0, .sure = h && hold_sure(*h)});
  }

  // The lead of the local run is held as the flow says (acquire_flow::leads):
  // taken when it starts to lead (the idle run's, or the one handed over in
  // the ticket); given to the hold it grants; else passed on the moment it
  // no longer leads (the acquire failed, or ended before it was handed).
  void follow_lead(const acquire_flow::action& next) {
    if (flow_.leads() && !lead_.leads()) {
      if (auto ticket = std::exchange(ticket_, nullptr)) {
        // (The lead handed over; or a lock whose session has ended, its
        // node gone: this acquire leads in its place.)
        auto h = ticket->handed_hold.lock();
        lead_ = ticket->lead.leads() ? std::move(ticket->lead)
                : h                  ? run_lead::taken_from(this->m_, *h, std::move(ticket->handed))
                                     : run_lead{};
      } else {
        this->m_->run.active = true;
        lead_ = run_lead(this->m_);
      }
    }
    if (flow_.leads() || std::holds_alternative<acquire_flow::granted>(next)) return;
    lead_ = {};
    if (ticket_ && ticket_->lead.leads()) ticket_.reset();
  }

  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();  // (lock_event's took)
  acquire_request request_;
  completion_ptr<lock> done_;
  acquire_flow flow_{{}};  // made in begin()
  std::int64_t downgrade_token_ = 0;  // a downgrade's: its write grant's fencing token
  std::unique_ptr<asio::steady_timer> deadline_;
  run_lead lead_;                         // of the local run, while this acquire leads it
  std::shared_ptr<run_ticket> ticket_;    // while waiting in the local run, until what it was handed is taken
  std::weak_ptr<completion<>> run_wait_;  // that wait
  pending_request connecting_;  // the wait for the connection, when the lead came while disconnected
};

// Creates a lease node (async_create_node) for its caller's attempt, which
// learns at once that a create was sent (for its removal, if it is stopped)
// and at the end what its node is.
class node_op final : public contender_run {
 public:
  node_op(std::shared_ptr<engine_state> m, attempt& a, completion_ptr<> done)
      : contender_run(std::move(m)), caller_(&a), done_(std::move(done)) {}

  void begin() {
    if (done_->done()) return;
    done_->on_cancel = [weak = std::weak_ptr<contender_run>(shared_from_this())] {
      if (auto self = weak.lock()) static_cast<node_op&>(*self).stop();
    };
    run({.kind = caller_->kind, .uuid = caller_->uuid, .one_look = caller_->one_look, .create_only = true});
  }

 private:
  const std::string& node_data() const override { return caller_->data; }
  void sent_create() override {
    caller_->generation = fsm_->generation();
    caller_->submitted = true;
    caller_->reply = reply_;
  }
  void ended(error_code ec) override {
    write_into(*caller_);
    done_->complete(ec);
  }

  attempt* caller_;  // lives until done_ completes: the caller awaits it
  completion_ptr<> done_;
};

}  // namespace

void start_create_node(const std::shared_ptr<engine_state>& m, attempt& a, completion_ptr<> done) {
  auto op = std::make_shared<node_op>(m, a, std::move(done));
  asio::dispatch(m->strand, [op] { op->begin(); });
}

void start_acquire(const std::shared_ptr<engine_state>& m, acquire_request request, completion_ptr<lock> done) {
  auto begin = [&]<class Attempts>(Attempts*) {
    auto op = std::make_shared<acquire_op<Attempts>>(m, std::move(request), std::move(done));
    asio::dispatch(m->strand, [op] { op->begin(); });
  };
  if (m->family != queue_family::race) return begin(static_cast<contender_run*>(nullptr));
  request.kind = node_kind::lock;  // (an election's too: the race's one node is of no queue's kind)
  begin(static_cast<race_run*>(nullptr));
}

}  // namespace zkasio::detail
