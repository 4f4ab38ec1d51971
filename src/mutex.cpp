#include <zkasio/mutex.hpp>

#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <zkasio/detail/lock_queue.hpp>

namespace zkasio {
namespace detail {

using asio::awaitable;
using asio::redirect_error;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;

// Curator's revocation request, written into the holder's node.
constexpr std::string_view revoke_message = "__REVOKE__";

struct mutex_state {
  session* s;
  std::string path;
  mutex_options options;
  lock_strand strand;
  std::vector<std::weak_ptr<hold>> holds;  // live holds, for reentrancy by owner
};

struct hold {
  std::shared_ptr<mutex_state> mutex;
  std::string node;  // full path
  std::int64_t czxid = 0;
  std::int32_t version = 0;
  std::uint64_t generation = 0;
  std::optional<owner> who;
  int grants = 1;  // lock objects sharing this node (reentrancy)
  bool released = false;
  bool lost = false;
  asio::cancellation_signal lost_signal;
  asio::cancellation_signal stop_monitor;
};

lock_strand strand_of(const mutex_state& state) { return state.strand; }

namespace {

void lose(hold& h) {
  if (h.lost || h.released) return;
  h.lost = true;
  h.lost_signal.emit(asio::cancellation_type::terminal);
}

// Errors that mean the node went with the session.
bool session_gone(std::error_code ec) {
  return ec == error::session_expired || ec == error::session_closed || ec == error::auth_failed;
}

// Deletes `node`, retrying after connection losses while the session that
// created it (generation) lives; never another session's node: the name
// carries this acquire's uuid. lock_lost when it was gone already.
awaitable<std::error_code> delete_node(std::shared_ptr<mutex_state> m, std::string node,
                                       std::uint64_t generation) {
  auto& s = *m->s;
  for (;;) {
    if (s.generation() != generation) co_return make_error_code(error::lock_lost);
    std::error_code ec;
    co_await s.async_remove(node, redirect_error(use_awaitable, ec));
    if (!ec) co_return ec;
    if (ec == error::no_node || session_gone(ec)) co_return make_error_code(error::lock_lost);
    if (ec != condition::retryable) co_return ec;
    co_await s.async_connect(redirect_error(use_awaitable, ec));
    if (ec) co_return make_error_code(error::lock_lost);
  }
}

// After a failed or cancelled acquire: deletes this acquire's node if the
// create took effect (its reply may not have come back), found by uuid.
// Requests run in order, so a listing sent now sees a node created before.
awaitable<void> delete_by_uuid(std::shared_ptr<mutex_state> m, std::string uuid,
                               std::uint64_t generation) {
  auto& s = *m->s;
  for (;;) {
    if (s.generation() != generation) co_return;
    auto [ec, kids] = co_await s.async_get_children(m->path, as_tuple(use_awaitable));
    if (ec == condition::retryable) {
      co_await s.async_connect(as_tuple(use_awaitable));
      continue;
    }
    if (ec) co_return;
    auto found = find_by_uuid(kids.names, uuid);
    if (!found) co_return;
    co_await delete_node(m, m->path + "/" + found->name, generation);
    co_return;
  }
}

awaitable<void> watch_node(std::shared_ptr<hold> h) {
  auto& s = *h->mutex->s;
  auto version = h->version;
  for (;;) {
    auto [ec, event] = co_await s.async_wait_data_changed(h->node, version, as_tuple(use_awaitable));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec || event == event_type::deleted) break;
    auto [read_ec, data] = co_await s.async_get_data(h->node, as_tuple(use_awaitable));
    if (read_ec == asio::error::operation_aborted) co_return;
    if (read_ec || data.data == revoke_message) break;
    version = data.stat.version;
  }
  lose(*h);
}

awaitable<void> watch_session(std::shared_ptr<hold> h) {
  auto& s = *h->mutex->s;
  auto state = s.state();
  for (;;) {
    if (s.generation() != h->generation || state == session_state::expired ||
        state == session_state::closed || state == session_state::auth_failed)
      break;
    if (state == session_state::suspended) {
      if (h->mutex->options.policy == lost_policy::on_suspend) break;
      // The server cannot expire the session before its last sight of it
      // plus the timeout: fire a margin before that.
      asio::steady_timer expiry(co_await asio::this_coro::executor,
                                s.last_contact() + s.negotiated_timeout() -
                                    h->mutex->options.safety_margin);
      auto change = co_await (s.async_wait_state_change(state, as_tuple(use_awaitable)) ||
                              expiry.async_wait(as_tuple(use_awaitable)));
      if (change.index() == 1) {
        if (std::get<0>(std::get<1>(change)) == asio::error::operation_aborted) co_return;
        break;
      }
      auto [ec, next] = std::get<0>(change);
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) break;
      state = next;
      continue;
    }
    auto [ec, next] = co_await s.async_wait_state_change(state, as_tuple(use_awaitable));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) break;
    state = next;
  }
  lose(*h);
}

// Watches what can take the lock away, until released.
void start_monitor(const std::shared_ptr<hold>& h) {
  asio::co_spawn(h->mutex->strand, watch_node(h) || watch_session(h),
                 asio::bind_cancellation_slot(h->stop_monitor.slot(), asio::detached));
}

// Creates the parents of the lock path, as containers.
awaitable<std::error_code> create_parents(session& s, const std::string& path) {
  const create_options container(create_mode::container);
  for (auto slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    auto parent = path.substr(0, slash);
    auto [ec, made] = co_await s.async_create(parent, "", container, as_tuple(use_awaitable));
    if (ec && ec != error::node_exists) co_return ec;
    if (slash == std::string::npos) co_return std::error_code{};
  }
}

struct attempt {
  std::string uuid;
  std::uint64_t generation = 0;
  std::string node;  // name under the lock path, once known
  node_stat stat;
  bool submitted = false;  // a create may have taken effect
};

// Creates this attempt's node and lists the queue in one round trip; after a
// lost create reply finds the node by its uuid (and only in this session).
awaitable<std::tuple<std::error_code, children>> create_node(mutex_state& m, attempt& a) {
  auto& s = *m.s;
  const create_options mode(create_mode::ephemeral_sequential);
  const std::string prefix = m.path + "/" + lock_node_prefix(a.uuid);
  for (int parents_made = 0;;) {
    a.generation = s.generation();
    a.submitted = true;
    // (The operator flattens the first tuple: create's error and result, then list's tuple.)
    auto [create_ec, node, listed] = co_await (
        s.async_create(prefix, m.options.data, mode, as_tuple(use_awaitable)) &&
        s.async_get_children(m.path, as_tuple(use_awaitable)));
    auto [list_ec, kids] = listed;
    if (!create_ec) {
      a.node = node.path.substr(m.path.size() + 1);
      a.stat = node.stat;
      if (list_ec) std::tie(list_ec, kids) = co_await s.async_get_children(m.path, as_tuple(use_awaitable));
      co_return std::make_tuple(list_ec, std::move(kids));
    }
    if (create_ec == error::no_node && parents_made++ == 0) {
      if (auto ec = co_await create_parents(s, m.path)) co_return std::make_tuple(ec, children{});
      continue;
    }
    if (create_ec != error::connection_loss) co_return std::make_tuple(create_ec, children{});
    // The create may have been applied: look for the node, in this session only.
    auto [connect_ec] = co_await s.async_connect(as_tuple(use_awaitable));
    if (connect_ec) co_return std::make_tuple(connect_ec, children{});
    if (s.generation() != a.generation) continue;  // a node of the old session is gone with it
    auto [again_ec, again] = co_await s.async_get_children(m.path, as_tuple(use_awaitable));
    if (again_ec) co_return std::make_tuple(again_ec, children{});
    if (auto found = find_by_uuid(again.names, a.uuid)) {
      auto [stat_ec, st] = co_await s.async_exists(m.path + "/" + found->name, as_tuple(use_awaitable));
      if (!stat_ec && st && st->ephemeral_owner == s.id()) {
        a.node = found->name;
        a.stat = *st;
        co_return std::make_tuple(std::error_code{}, std::move(again));
      }
    }
  }
}

// The whole acquire: create, then wait in the queue until first.
awaitable<std::tuple<std::error_code, lock>> queue_up(std::shared_ptr<mutex_state> m,
                                                      std::optional<owner> who, bool try_once,
                                                      attempt& a) {
  auto& s = *m->s;
  if (auto [ec] = co_await s.async_connect(as_tuple(use_awaitable)); ec)
    co_return std::make_tuple(ec, lock{});
  auto [ec, kids] = co_await create_node(*m, a);
  for (;;) {
    if (ec) co_return std::make_tuple(ec, lock{});
    if (s.generation() != a.generation)
      co_return std::make_tuple(make_error_code(error::session_expired), lock{});
    auto verdict = decide(lock_queue(kids.names), a.node);
    if (verdict.what == lock_verdict::missing)
      co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
    if (verdict.what == lock_verdict::wait && try_once)
      co_return std::make_tuple(make_error_code(error::lock_busy), lock{});
    if (verdict.what == lock_verdict::wait) {
      auto [wait_ec] =
          co_await s.async_wait_deleted(m->path + "/" + verdict.predecessor, as_tuple(use_awaitable));
      if (wait_ec) co_return std::make_tuple(wait_ec, lock{});
      // Nodes below mine only ever go: if the predecessor was the last, mine is first.
      if (!verdict.predecessor_is_last) {
        std::tie(ec, kids) = co_await s.async_get_children(m->path, as_tuple(use_awaitable));
        continue;
      }
    }
    auto h = std::make_shared<hold>();
    h->mutex = m;
    h->node = m->path + "/" + a.node;
    h->czxid = a.stat.czxid;
    h->version = a.stat.version;
    h->generation = a.generation;
    h->who = who;
    m->holds.push_back(h);
    start_monitor(h);
    co_return std::make_tuple(std::error_code{}, lock(h));
  }
}

std::atomic<std::uint64_t> next_owner_id{1};

}  // namespace
}  // namespace detail

// ----------------------------------------------------------------- owner

owner::owner() : id_(detail::next_owner_id.fetch_add(1, std::memory_order_relaxed)) {}

// ----------------------------------------------------------------- lock

lock::lock(std::shared_ptr<detail::hold> hold) : hold_(std::move(hold)), mutex_(hold_->mutex) {}

lock& lock::operator=(lock&& other) noexcept {
  if (this != &other) {
    lock old(std::move(*this));
    hold_ = std::move(other.hold_);
    mutex_ = std::move(other.mutex_);
  }
  return *this;
}

lock::~lock() {
  if (!hold_) return;
  // Released in the background; the delete is retried while the session lives.
  asio::co_spawn(mutex_->strand, release_coroutine(std::move(hold_)), asio::detached);
}

bool lock::held() const noexcept { return hold_ && !hold_->released; }
const std::string& lock::node() const {
  static const std::string none;
  return hold_ ? hold_->node : none;
}
std::int64_t lock::fencing_token() const { return hold_ ? hold_->czxid : 0; }
bool lock::lost() const noexcept { return !hold_ || hold_->lost; }
asio::cancellation_slot lock::lost_slot() {
  if (!hold_) throw std::system_error(make_error_code(error::not_held), "lock::lost_slot");
  return hold_->lost_signal.slot();
}
asio::strand<asio::any_io_executor> lock::get_executor() const {
  if (!mutex_) throw std::system_error(make_error_code(error::not_held), "a lock that never held");
  return mutex_->strand;
}

asio::awaitable<std::tuple<std::error_code>> lock::release_coroutine(
    std::shared_ptr<detail::hold> hold) {
  if (!hold || hold->released) co_return std::make_tuple(make_error_code(error::not_held));
  if (--hold->grants > 0) co_return std::make_tuple(std::error_code{});
  bool was_lost = hold->lost;
  hold->released = true;
  hold->stop_monitor.emit(asio::cancellation_type::terminal);
  std::erase_if(hold->mutex->holds, [&](auto& w) { return w.lock() == hold; });
  // The delete runs on its own, so that it completes even if this wait is
  // cancelled (then operation_aborted, and the delete goes on in the background).
  struct outcome {
    asio::steady_timer finished;
    std::optional<std::error_code> result;
  };
  auto shared = std::make_shared<outcome>(outcome{asio::steady_timer(hold->mutex->strand,
                                                  asio::steady_timer::time_point::max()), {}});
  asio::co_spawn(
      hold->mutex->strand,
      [](std::shared_ptr<detail::hold> hold, std::shared_ptr<outcome> shared) -> asio::awaitable<void> {
        shared->result = co_await detail::delete_node(hold->mutex, hold->node, hold->generation);
        shared->finished.cancel();
      }(hold, shared),
      asio::detached);
  if (!shared->result)
    co_await shared->finished.async_wait(detail::as_tuple(detail::use_awaitable));
  if (!shared->result) co_return std::make_tuple(std::error_code(asio::error::operation_aborted));
  auto ec = *shared->result;
  if (!ec && was_lost) ec = make_error_code(error::lock_lost);
  co_return std::make_tuple(ec);
}

asio::awaitable<std::tuple<std::error_code, std::vector<op_result>>> lock::guarded_multi_coroutine(
    std::shared_ptr<detail::hold> hold, std::vector<multi_op> ops) {
  if (!hold || hold->released)
    co_return std::make_tuple(make_error_code(error::not_held), std::vector<op_result>{});
  ops.insert(ops.begin(), op::check{hold->node, any_version});
  auto [ec, results] = co_await hold->mutex->s->async_multi(std::move(ops),
                                                            detail::as_tuple(detail::use_awaitable));
  // The check failed: the node is gone, so the lock was lost.
  if (ec == error::no_node && !results.empty() && results.front().error == error::no_node)
    ec = make_error_code(error::lock_lost);
  co_return std::make_tuple(ec, std::move(results));
}

// ----------------------------------------------------------------- mutex

mutex::mutex(session& s, std::string_view path, mutex_options options)
    : state_(std::make_shared<detail::mutex_state>(detail::mutex_state{
          &s, std::string(path), std::move(options),
          asio::make_strand(s.get_executor()), {}})) {
  if (auto problem = path_problem(path); !problem.empty())
    throw std::system_error(make_error_code(error::invalid_path), problem);
  if (path == "/")
    throw std::system_error(make_error_code(error::invalid_path), "the root cannot be a lock path");
}

mutex::~mutex() = default;

mutex::executor_type mutex::get_executor() const { return state_->strand; }
const std::string& mutex::path() const { return state_->path; }

asio::awaitable<std::tuple<std::error_code, lock>> mutex::acquire_coroutine(
    std::shared_ptr<detail::mutex_state> state, std::optional<owner> who, bool try_once,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  using namespace detail;
  // Partial cancellation too, from now on; a cancellation that came before
  // this coroutine ran is in the state that the reset replaces.
  auto early = (co_await asio::this_coro::cancellation_state).cancelled();
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  if (early != asio::cancellation_type::none)
    co_return std::make_tuple(std::error_code(asio::error::operation_aborted), lock{});
  if (who) {
    for (auto& weak : state->holds)
      if (auto h = weak.lock(); h && h->who == who && !h->released && !h->lost) {
        ++h->grants;
        co_return std::make_tuple(std::error_code{}, lock(h));
      }
  }
  attempt a{.uuid = make_uuid(), .generation = state->s->generation(), .node = {}, .stat = {}};
  std::tuple<std::error_code, lock> result;
  try {
    if (deadline) {
      asio::steady_timer timer(co_await asio::this_coro::executor, *deadline);
      auto raced = co_await (queue_up(state, who, try_once, a) || timer.async_wait(use_awaitable));
      if (raced.index() == 0) result = std::move(std::get<0>(raced));
      else std::get<0>(result) = make_error_code(error::lock_timeout);
    } else {
      result = co_await queue_up(state, who, try_once, a);
    }
  } catch (const std::system_error& e) {
    std::get<0>(result) = e.code();
  }
  auto& [ec, granted] = result;
  if (ec == error::lock_busy) {
    // try_acquire leaves no node behind by the time it reports.
    try {
      co_await delete_node(state, state->path + "/" + a.node, a.generation);
    } catch (const std::system_error&) {  // cancelled meanwhile: the background finishes
      asio::co_spawn(state->strand, delete_by_uuid(state, a.uuid, a.generation), asio::detached);
    }
  } else if (ec && a.submitted) {
    // Nothing may be left behind: delete this attempt's node, wherever the
    // failure or cancellation struck (in the background, so cancellation is prompt).
    asio::co_spawn(state->strand, delete_by_uuid(state, a.uuid, a.generation), asio::detached);
  }
  co_return std::move(result);
}

asio::awaitable<std::tuple<std::error_code, std::vector<contender>>> mutex::contenders_coroutine(
    std::shared_ptr<detail::mutex_state> state) {
  using namespace detail;
  auto& s = *state->s;
  auto [ec, kids] = co_await s.async_get_children(state->path, as_tuple(use_awaitable));
  std::vector<contender> queue;
  if (ec) co_return std::make_tuple(ec == error::no_node ? std::error_code{} : ec, std::move(queue));
  for (auto& node : lock_queue(kids.names)) {
    auto [read_ec, data] = co_await s.async_get_data(state->path + "/" + node.name, as_tuple(use_awaitable));
    if (read_ec == error::no_node) continue;  // it went while we read
    if (read_ec) co_return std::make_tuple(read_ec, std::vector<contender>{});
    queue.push_back({node.name, node.sequence, std::move(data.data)});
  }
  co_return std::make_tuple(std::error_code{}, std::move(queue));
}

asio::awaitable<std::tuple<std::error_code>> mutex::revoke_coroutine(
    std::shared_ptr<detail::mutex_state> state, std::string node) {
  using namespace detail;
  if (!parse_lock_node(node)) co_return std::make_tuple(make_error_code(error::not_held));
  auto [ec, st] = co_await state->s->async_set_data(state->path + "/" + node, revoke_message,
                                                    as_tuple(use_awaitable));
  if (ec == error::no_node) ec = make_error_code(error::not_held);
  co_return std::make_tuple(ec);
}

}  // namespace zkasio
