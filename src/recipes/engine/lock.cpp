// The lock object (a grant of a hold) and owner.
#include "recipes/engine/engine_hold.hpp"

namespace zkasio {

namespace {
std::atomic<std::uint64_t> next_owner_id{1};
}  // namespace

owner::owner() : id_(next_owner_id.fetch_add(1, std::memory_order_relaxed)) {}


lock& lock::operator=(lock&& other) noexcept {
  if (this != &other) {
    lock old(std::move(*this));
    grant_ = std::move(other.grant_);
    engine_ = std::move(other.engine_);
  }
  return *this;
}

lock::~lock() = default;  // the grant gives its share back (see detail::grant)

detail::grant::~grant() {
  if (!held) return;
  if (!lost_waiters.empty())
    asio::post(held->engine->strand, [waits = std::move(lost_waiters)] {
      for (auto& done : waits) done->complete(make_error_code(error::not_held));
    });
  if (given_back) return;
  // In the background; the delete is retried while the session lives. (At
  // once when dropped on the strand: the next contender may be of this
  // process, e.g. the semaphore's mutex released as its acquire completes.)
  asio::dispatch(held->engine->strand, [held = held, granted_at = granted_at] {
    report_grant(*held, granted_at, lock_event::kind::released);
    give_back(held, nullptr);
  });
}

void detail::start_wait_lost(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g,
                             completion_ptr<> done) {
  asio::dispatch(engine->strand, [g = std::move(g), done = std::move(done)]() mutable {
    if (!g || g->given_back || g->held->released) return done->complete(make_error_code(error::not_held));
    if (g->held->lost) return done->complete({});
    std::erase_if(g->lost_waiters, [](auto& waiting) { return waiting->done(); });  // cancelled ones
    g->lost_waiters.push_back(std::move(done));
  });
}

bool lock::held() const noexcept { return grant_ && !grant_->held->released.load(std::memory_order_acquire); }

const std::string& lock::node() const {
  static const std::string none;
  return grant_ ? grant_->held->node : none;
}

fence_token lock::fencing_token() const {
  return grant_ ? fence_token{grant_->held->token, grant_->local} : fence_token{};
}

bool lock::lost() const noexcept { return !grant_ || grant_->held->lost.load(std::memory_order_acquire); }

asio::cancellation_slot lock::lost_slot() {
  if (!grant_) throw system_error(make_error_code(error::not_held), "lock::lost_slot");
  if (!lost()) return grant_->lost_signal.slot();
  // Lost already: a signal of its own, emitted after the caller (on the
  // strand) has bound it, so that a binding after the loss is not missed.
  // Those emitted whose operation has let go of them go now (a loop that
  // binds one per turn keeps a few, not one per turn).
  std::erase_if(grant_->late_signals, [](auto& late) { return late.emitted && !late.signal.slot().has_handler(); });
  auto& late = grant_->late_signals.emplace_back();
  asio::post(engine_->strand, [grant = grant_, &late] {
    late.signal.emit(asio::cancellation_type::terminal);
    late.emitted = true;
  });
  return late.signal.slot();
}

asio::any_io_executor lock::get_executor() const {
  if (!engine_) throw system_error(make_error_code(error::not_held), "a lock that never held");
  return engine_->strand;
}

// (Whether or not its caller still waits: the grant was taken at launch.)
void detail::start_release(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g,
                           completion_ptr<> done) {
  asio::dispatch(engine->strand, [g = std::move(g), done = std::move(done)]() mutable {
    if (!g || g->given_back) return done->complete(make_error_code(error::not_held));
    g->given_back = true;
    report_grant(*g->held, g->granted_at, lock_event::kind::released);
    g->end_lost_waits(make_error_code(error::not_held));
    std::erase_if(g->held->grant_list, [&](auto& weak) { return weak.expired() || weak.lock() == g; });
    give_back(g->held, std::move(done));
  });
}

bool detail::holds_own_node(const std::shared_ptr<engine_state>& engine) { return engine && engine->own_node; }

void detail::start_leave(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g,
                         completion_ptr<> done) {
  asio::dispatch(engine->strand, [engine, g = std::move(g), done = std::move(done)]() mutable {
    if (!g || g->given_back || g->held->released) return done->complete(make_error_code(error::not_held));
    if (!engine->own_node) return done->complete(make_error_code(error::not_own_node));
    g->given_back = true;
    report_grant(*g->held, g->granted_at, lock_event::kind::released);
    g->end_lost_waits(make_error_code(error::not_held));
    std::erase_if(g->held->grant_list, [&](auto& weak) { return weak.expired() || weak.lock() == g; });
    leave(g->held, std::move(done));
  });
}

void detail::start_guarded_multi(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g,
                                 std::vector<multi_op> ops, completion_ptr<std::vector<op_result>> done) {
  asio::dispatch(engine->strand, [g = std::move(g), ops = std::move(ops), done = std::move(done)]() mutable {
    if (done->done()) return;  // cancelled before it started: nothing sent
    // (A hold lives on after this grant's release when it was handed over in
    // memory: the grant's own release counts.)
    if (!g || g->given_back || g->held->released) return done->complete(make_error_code(error::not_held), {});
    auto& hold = *g->held;
    if (hold.name.empty()) return done->complete(make_error_code(error::not_fenced), {});
    // (A lock that may be lost, or whose session is another now, writes nothing.)
    if (hold.lost || hold.engine->s.id() != hold.owner_id)
      return done->complete(make_error_code(error::lock_lost), {});
    ops.insert(ops.begin(), op::check{hold.node, any_version});
    // A cancellation completes `done` at once; the multi, sent, goes on (as a
    // session's write does). Pinned to the hold's session: once that has
    // ended, it is refused unsent.
    hold.engine->s.pinned(hold.generation).async_multi(
        std::move(ops), asio::bind_executor(hold.engine->strand, [done = std::move(done)](
                                                                 error_code ec, std::vector<op_result> results) {
          // The check failed: the node is gone, so the lock was lost; so it
          // was if the hold's session ended before the multi could go.
          bool checked_gone = ec == zk_error::no_node && !results.empty() && results.front().error == zk_error::no_node;
          if (checked_gone || ec == zk_error::session_expired) ec = make_error_code(error::lock_lost);
          done->complete(ec, std::move(results));
        }));
  });
}

}  // namespace zkasio
