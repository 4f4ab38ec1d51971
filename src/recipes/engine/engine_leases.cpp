// The semaphore's leases (Curator's InterProcessSemaphoreV2): the runner of
// lease_acquire and, its wait for room, room_wait (state machines without
// I/O), a machine_run as the acquire's runners are (machine_run.hpp).
#include "recipes/engine/acquire_runner.hpp"
#include "recipes/engine/engine_acquire.hpp"
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"
#include "recipes/engine/machine_run.hpp"
#include "recipes/machines/lease_acquire.hpp"
#include "recipes/machines/room_wait.hpp"

namespace zkasio::detail {

namespace {

// One acquire of leases, from the caller's operation to its completion
// `done_`: each action carried out on the session, its answer fed back in.
// The deadline and the caller's cancellation stop it where it stands: the
// mutex's acquire and a lease's create are cancelled at once (their nodes
// go), the attempt's leases go in the background.
class lease_op final : public machine_run<lease_op> {
 public:
  lease_op(std::shared_ptr<engine_state> leases, std::shared_ptr<engine_state> locks, lease_request request,
           completion_ptr<std::vector<lock>> done)
      : machine_run(std::move(leases)), locks_(std::move(locks)), request_(request), done_(std::move(done)) {}

  // On the strand.
  void begin() {
    if (done_->done()) return;  // cancelled before it ran: nothing made
    report(m_->options, m_->path, lock_event::kind::acquiring, {}, {});
    deadline_ = arm_stops(m_, *done_, request_.deadline, [weak = weak_from_this()](error_code ec) {
      if (auto self = weak.lock()) self->stop_with(ec);
    });
    fsm_.emplace(lease_acquire::request{.count = request_.count,
                                        .max = request_.max,
                                        .try_once = request_.try_once,
                                        .requeue_on_expiry = m_->options.requeue_on_expiry});
    act(fsm_->start(look()));
  }

 private:
  friend class machine_run<lease_op>;

  bool running() const { return fsm_ && !fsm_->finished(); }

  lease_acquire::look look() const {
    auto state = m_->s.state();
    return {m_->s.generation(), state == session_state::expired, state == session_state::closed};
  }
  room_wait::look room_look() const { return {m_->s.generation(), session_sure(*m_), never_sure(*m_), mutex_lost_}; }

  void resume(const lease_acquire::event& e) {
    auto next = fsm_->resume(e, look());
    // The attempt left (failed, or another begins), whatever the event
    // said (a lease answered without an error in a session that has ended):
    // its leases go before what follows is carried out.
    if (std::holds_alternative<lease_acquire::take_mutex>(next) || std::holds_alternative<lease_acquire::fail>(next))
      removing_ = discard(m_, std::exchange(mine_, {}));
    act(std::move(next));
  }
  void resume(const room_wait::event& e) {
    watching_ = false;
    act(room_->resume(e, room_look()));
  }

  void act(lease_acquire::action next) {
    using la = lease_acquire;
    if (std::holds_alternative<la::granted>(next)) {
      std::vector<lock> held;
      for (auto& a : std::exchange(mine_, {})) held.push_back(granted(m_, std::move(a), std::nullopt));
      mutex_ = {};  // (released in the background)
      return complete({}, std::move(held));
    }
    if (auto* f = std::get_if<la::fail>(&next)) {
      mutex_ = {};
      if (!f->after_removal) return complete(f->ec);
      return after_removal(m_, std::exchange(removing_, {}), f->ec, [self = shared_from_this()](error_code ec) {
        self->complete(ec);
      });
    }
    if (std::holds_alternative<la::take_mutex>(next)) return take_mutex();
    if (auto* l = std::get_if<la::make_lease>(&next)) return make_lease(l->index);
    room_wait::leases leases{.generation = mine_.front().generation, .max = request_.max, .one_look = request_.try_once};
    for (auto& a : mine_) leases.names.push_back(a.node.name);
    room_.emplace(std::move(leases));
    act(room_->start(room_look()));
  }

  void act(room_wait::action next) {
    using rw = room_wait;
    if (std::holds_alternative<rw::granted>(next)) return resume(lease_acquire::room_ended{{}, mutex_lost_});
    if (auto* f = std::get_if<rw::fail>(&next)) return resume(lease_acquire::room_ended{f->ec, mutex_lost_});
    if (std::holds_alternative<rw::list>(next))
      return m_->s.async_get_children(m_->path, reply([](error_code ec, children kids) -> rw::event {
                                        return rw::listed{ec, std::move(kids.names), kids.stat.cversion};
                                      }));
    if (std::holds_alternative<rw::confirm>(next))
      return m_->s.async_confirm_contact(reply([](error_code ec) -> rw::event { return rw::confirmed{ec}; }));
    if (auto* c = std::get_if<rw::connect>(&next))
      return connect(c->after, [](error_code ec) -> rw::event { return rw::connected{ec}; });
    // Until the children change, or the mutex may be lost (mutex_watch).
    if (mutex_lost_) return resume(rw::mutex_lost{});
    watching_ = true;
    m_->s.async_wait_children_changed(m_->path, std::get<rw::watch>(next).cversion,
                                      reply([](error_code ec, event_type) -> rw::event { return rw::changed{ec}; }));
  }

  // The semaphore's mutex, for a new attempt (its leases not made yet).
  void take_mutex() {
    mutex_ = {};
    mutex_lost_ = false;
    ++attempts_;
    mine_.clear();
    for (std::size_t i = 0; i < request_.count; ++i)
      mine_.push_back(fresh_attempt(*m_, {.kind = node_kind::lease, .try_once = request_.try_once}));
    taking_ = make_completion<lock>(on_strand([](lease_op& self, error_code ec, lock taken) {
                                      self.taking_ = nullptr;
                                      self.mutex_ = std::move(taken);
                                      if (!ec) self.watch_mutex();
                                      self.resume(lease_acquire::mutex_taken{ec});
                                    }),
                                    m_->strand, m_->strand, write_cancellation);
    start_acquire(locks_, {.try_once = request_.try_once}, taking_);
  }

  // The mutex as its holder sees it: mutex_lost_ is set the moment it may be
  // lost (see room_wait.hpp), and a wait for room that watches ends in the
  // next tick (not inside the lost signal: what follows may drop the mutex,
  // whose signal this is). (Emitted on the locks' strand, which is this one:
  // see semaphore.hpp.)
  void watch_mutex() {
    mutex_.lost_slot().assign([weak = weak_from_this(), attempt = attempts_](asio::cancellation_type) {
      auto self = weak.lock();
      if (!self || attempt != self->attempts_ || !self->running()) return;
      self->mutex_lost_ = true;
      asio::post(self->m_->strand, [self, attempt] {
        if (attempt != self->attempts_ || !self->running() || !std::exchange(self->watching_, false)) return;
        self->stop_pending();  // (the children's watch: its answer is dropped)
        self->resume(room_wait::mutex_lost{});
      });
    });
  }

  void make_lease(std::size_t index) {
    creating_ = make_completion<>(on_strand([index](lease_op& self, error_code ec) {
                                    self.creating_ = nullptr;
                                    self.resume(lease_acquire::lease_made{ec, self.mine_[index].generation});
                                  }),
                                  m_->strand, m_->strand, write_cancellation);
    start_create_node(m_, mine_[index], creating_);
  }

  // The deadline, or the caller's cancellation: the request pending stops
  // at once (a create writes nothing more into the attempt), and the
  // attempt's nodes go in the background.
  void stop_with(error_code ec) {
    if (!running()) return;
    fsm_->abort();
    stop_pending();
    if (auto taking = std::exchange(taking_, nullptr)) taking->cancel();
    if (auto creating = std::exchange(creating_, nullptr)) creating->cancel();
    discard(m_, std::exchange(mine_, {}));
    mutex_ = {};
    complete(ec);
  }

  void complete(error_code ec, std::vector<lock> held = {}) {
    if (deadline_) deadline_->cancel();
    report_outcome(*m_, started_, ec, held);
    done_->complete(ec, std::move(held));
  }

  std::shared_ptr<engine_state> locks_;  // the semaphore's mutex's engine (on this strand)
  lease_request request_;
  completion_ptr<std::vector<lock>> done_;
  std::unique_ptr<asio::steady_timer> deadline_;
  std::optional<lease_acquire> fsm_;
  std::optional<room_wait> room_;    // the attempt's wait for room, once its leases are made
  std::vector<attempt> mine_;        // the attempt's leases
  lock mutex_;                       // while the attempt holds it (released in the background when dropped)
  bool mutex_lost_ = false;          // it may be lost (watch_mutex)
  std::uint32_t attempts_ = 0;       // counts the mutexes taken: a former one's loss is not this one's
  bool watching_ = false;            // the wait for room watches the children
  completion_ptr<lock> taking_;      // the mutex's acquire, while pending
  completion_ptr<> creating_;        // a lease's create, while pending
  std::vector<background<error_code>> removing_;  // the last attempt's leases, going
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();  // (lock_event's took)
};

}  // namespace

void start_acquire_leases(const std::shared_ptr<engine_state>& leases, const std::shared_ptr<engine_state>& locks,
                          lease_request request, completion_ptr<std::vector<lock>> done) {
  auto op = std::make_shared<lease_op>(leases, locks, request, std::move(done));
  asio::dispatch(leases->strand, [op] { op->begin(); });
}

}  // namespace zkasio::detail
