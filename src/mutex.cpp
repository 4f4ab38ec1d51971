#include <zkasio/mutex.hpp>

#include <asio/bind_executor.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <map>
#include <mutex>
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

struct listing_round;

// The nodes of one lock path on one ensemble that this process's mutexes
// created and have not seen go, shared by all of them (whatever their
// session). A node not here may be another process's and still there; a node
// here may be gone (its session expired), which its successor's watch finds.
// So "not here" is only ever believed of nodes that are gone.
struct known_nodes {
  std::mutex guard;
  own_nodes alive;
};

std::shared_ptr<known_nodes> known_nodes_of(const std::string& hosts, const std::string& path) {
  static std::mutex table_guard;
  static std::map<std::pair<std::string, std::string>, std::weak_ptr<known_nodes>> table;
  std::lock_guard lock(table_guard);
  auto& slot = table[{hosts, path}];
  if (auto known = slot.lock()) return known;
  std::erase_if(table, [](auto& entry) { return entry.second.expired(); });
  auto known = std::make_shared<known_nodes>();
  table[{hosts, path}] = known;
  return known;
}

// The mutex's strand. Over an io_context's own executor when that is what the
// session runs on: such a strand fits in any_io_executor's small buffer, so
// the copies that every waiting coroutine makes allocate nothing.
lock_strand make_lock_strand(const asio::any_io_executor& executor) {
  if (auto* io = executor.target<asio::io_context::executor_type>()) return asio::make_strand(*io);
  return asio::make_strand(executor);
}

struct mutex_state {
  mutex_state(session& s, std::string path, mutex_options options)
      : s(&s), path(std::move(path)), options(std::move(options)), strand(make_lock_strand(s.get_executor())),
        known(known_nodes_of(s.hosts(), this->path)) {}
  session* s;
  std::string path;
  mutex_options options;
  lock_strand strand;
  std::vector<std::weak_ptr<hold>> holds;  // live holds, for reentrancy by owner
  std::shared_ptr<known_nodes> known;
  std::shared_ptr<listing_round> next_listing;  // not sent yet: contenders may join it
};

// A listing of the lock's children shared by the contenders that asked for
// one before it was sent.
struct listing_round {
  explicit listing_round(const lock_strand& strand) : ready(strand, asio::steady_timer::time_point::max()) {}
  asio::steady_timer ready;  // cancelled when the reply is in
  bool done = false;
  std::error_code ec;
  std::shared_ptr<const queue_view> view;
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

namespace {

// A node seen gone (deleted, or its deletion watched).
void forget_own(mutex_state& m, std::string_view name) {
  auto node = parse_lock_node(name);
  if (!node) return;
  std::lock_guard lock(m.known->guard);
  auto& alive = m.known->alive;
  if (auto it = alive.find(node->sequence); it != alive.end() && it->second == name) alive.erase(it);
}

std::shared_ptr<const queue_view> view_of(mutex_state& m, const std::vector<std::string>& children) {
  auto queue = lock_queue(children);  // parsed and sorted before taking the process-wide lock
  std::lock_guard lock(m.known->guard);
  return std::make_shared<const queue_view>(make_view(std::move(queue), m.known->alive));
}

// A listing sent after every request submitted so far (a session's requests
// run in order): contenders that ask before it goes out share it.
awaitable<std::tuple<std::error_code, std::shared_ptr<const queue_view>>> fresh_listing(
    std::shared_ptr<mutex_state> m) {
  auto round = m->next_listing;
  if (!round) {
    round = m->next_listing = std::make_shared<listing_round>(m->strand);
    asio::post(m->strand, [m, round] {
      m->next_listing.reset();
      m->s->async_get_children(
          m->path, asio::bind_executor(m->strand, [m, round](std::error_code ec, children kids) {
            round->ec = ec;
            if (!ec) round->view = view_of(*m, kids.names);
            round->done = true;
            round->ready.cancel();
          }));
    });
  }
  if (!round->done) co_await round->ready.async_wait(as_tuple(use_awaitable));
  if (!round->done)
    co_return std::make_tuple(std::error_code(asio::error::operation_aborted), nullptr);
  co_return std::make_tuple(round->ec, round->view);
}

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
    if (s.generation() != generation) {
      forget_own(*m, std::string_view(node).substr(m->path.size() + 1));  // gone with its session
      co_return make_error_code(error::lock_lost);
    }
    std::error_code ec;
    co_await s.async_remove(node, redirect_error(use_awaitable, ec));
    if (!ec || ec == error::no_node) forget_own(*m, std::string_view(node).substr(m->path.size() + 1));
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
  // The handler keeps the hold (and so the signal its slot belongs to) alive
  // until the monitor has let go of the slot.
  asio::co_spawn(h->mutex->strand, watch_node(h) || watch_session(h),
                 asio::bind_cancellation_slot(h->stop_monitor.slot(),
                                              [h](std::exception_ptr, std::variant<std::monostate, std::monostate>) {}));
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
  lock_node node;  // once known
  node_stat stat;
  bool submitted = false;  // a create may have taken effect
};

using listing = std::tuple<std::error_code, std::shared_ptr<const queue_view>>;

// A node this mutex created: remembered as its own.
std::optional<lock_node> adopt(mutex_state& m, std::string_view name) {
  auto node = parse_lock_node(name);
  if (!node) return node;
  std::lock_guard lock(m.known->guard);
  m.known->alive.insert_or_assign(node->sequence, node->name);
  return node;
}

// A create's outcome, filled in by its completion. That runs on the mutex's
// strand before the completion of any listing sent after the create (replies
// come in order), so a listing's view already counts the node as own. Shared:
// a cancelled acquire may be gone before the reply comes.
struct create_reply {
  bool done = false;
  std::error_code ec;
  lock_node node;
  node_stat stat;
};

std::shared_ptr<create_reply> send_create(const std::shared_ptr<mutex_state>& m, const std::string& prefix) {
  auto reply = std::make_shared<create_reply>();
  const create_options mode(create_mode::ephemeral_sequential);
  m->s->async_create(prefix, m->options.data, mode,
                     asio::bind_executor(m->strand, [m, reply](std::error_code ec, created made) {
                       reply->done = true;
                       reply->ec = ec;
                       if (ec) return;
                       auto node = adopt(*m, std::string_view(made.path).substr(m->path.size() + 1));
                       if (!node) reply->ec = make_error_code(error::system_error);  // not a name we asked for
                       else reply->node = std::move(*node), reply->stat = made.stat;
                     }));
  return reply;
}

// After a lost create reply the create may have been applied: finds the node
// by its uuid, in this session only. nullopt: it is not there, create again.
// (A coroutine of its own, so that a waiter's frame does not carry all this.)
awaitable<std::optional<listing>> find_lost_node(std::shared_ptr<mutex_state> m, attempt& a) {
  auto& s = *m->s;
  auto [connect_ec] = co_await s.async_connect(as_tuple(use_awaitable));
  if (connect_ec) co_return listing(connect_ec, nullptr);
  if (s.generation() != a.generation) co_return std::nullopt;  // a node of the old session is gone with it
  auto [list_ec, kids] = co_await s.async_get_children(m->path, as_tuple(use_awaitable));
  if (list_ec) co_return listing(list_ec, nullptr);
  auto found = find_by_uuid(kids.names, a.uuid);
  if (!found) co_return std::nullopt;
  auto [stat_ec, st] = co_await s.async_exists(m->path + "/" + found->name, as_tuple(use_awaitable));
  if (stat_ec || !st || st->ephemeral_owner != s.id()) co_return std::nullopt;
  a.node = *adopt(*m, found->name);  // found parses
  a.stat = *st;
  co_return listing(std::error_code{}, view_of(*m, kids.names));
}

// Creates this attempt's node and lists the queue in one round trip; after a
// lost create reply finds the node by its uuid (and only in this session).
awaitable<listing> create_node(std::shared_ptr<mutex_state> m, attempt& a) {
  auto& s = *m->s;
  const std::string prefix = m->path + "/" + lock_node_prefix(a.uuid);
  for (int parents_made = 0;;) {
    a.generation = s.generation();
    a.submitted = true;
    auto reply = send_create(m, prefix);
    auto listed = co_await fresh_listing(m);
    if (!reply->done) {  // cancelled, or the listing refused at once: the caller deletes by uuid
      if (!std::get<0>(listed)) std::get<0>(listed) = make_error_code(error::system_error);
      co_return listed;
    }
    auto create_ec = reply->ec;
    if (!create_ec) {
      a.node = std::move(reply->node);
      a.stat = reply->stat;
      if (std::get<0>(listed)) listed = co_await fresh_listing(m);
      co_return listed;
    }
    if (create_ec == error::no_node && parents_made++ == 0) {
      if (auto ec = co_await create_parents(s, m->path)) co_return listing(ec, nullptr);
      continue;
    }
    if (create_ec != error::connection_loss) co_return listing(create_ec, nullptr);
    if (auto found = co_await find_lost_node(m, a)) co_return std::move(*found);
  }
}

// Waits until mine is first, from the verdict on a listing: true when it is,
// false when the queue must be listed again.
// (The verdict's parts as parameters: g++ 12 may destroy an aggregate passed
// by value in a co_await twice.)
awaitable<std::tuple<std::error_code, bool>> wait_turn(std::shared_ptr<mutex_state> m, const attempt& a,
                                                       std::string predecessor, bool relist_after) {
  auto& s = *m->s;
  for (;;) {
    auto [ec] = co_await s.async_wait_deleted(m->path + "/" + predecessor, as_tuple(use_awaitable));
    if (!ec && s.generation() != a.generation) ec = make_error_code(error::session_expired);
    if (ec) co_return std::make_tuple(ec, false);
    forget_own(*m, predecessor);
    if (relist_after) co_return std::make_tuple(std::error_code{}, false);
    // Only known nodes were below: which of them may still be there is known.
    std::optional<std::string> next;
    {
      std::lock_guard lock(m->known->guard);
      next = next_own_predecessor(m->known->alive, a.node.sequence);
    }
    if (!next) co_return std::make_tuple(std::error_code{}, true);
    predecessor = std::move(*next);
  }
}

// The whole acquire: create, then wait in the queue until first.
awaitable<std::tuple<std::error_code, lock>> queue_up(std::shared_ptr<mutex_state> m,
                                                      std::optional<owner> who, bool try_once,
                                                      attempt& a) {
  auto& s = *m->s;
  if (s.state() != session_state::connected)
    if (auto [ec] = co_await s.async_connect(as_tuple(use_awaitable)); ec)
      co_return std::make_tuple(ec, lock{});
  auto [ec, view] = co_await create_node(m, a);
  for (;;) {
    if (ec) co_return std::make_tuple(ec, lock{});
    if (s.generation() != a.generation)
      co_return std::make_tuple(make_error_code(error::session_expired), lock{});
    auto verdict = decide(*view, a.node);
    view.reset();  // a waiter keeps no listing: there may be thousands of both
    if (verdict.what == lock_verdict::missing)
      co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
    if (verdict.what == lock_verdict::wait && try_once)
      co_return std::make_tuple(make_error_code(error::lock_busy), lock{});
    if (verdict.what == lock_verdict::wait) {
      auto [wait_ec, first] = co_await wait_turn(m, a, std::move(verdict.predecessor), verdict.relist_after);
      if (wait_ec) co_return std::make_tuple(wait_ec, lock{});
      if (!first) {
        std::tie(ec, view) = co_await fresh_listing(m);
        continue;
      }
    }
    auto h = std::make_shared<hold>();
    h->mutex = m;
    h->node = m->path + "/" + a.node.name;
    h->czxid = a.stat.czxid;
    h->version = a.stat.version;
    h->generation = a.generation;
    h->who = who;
    m->holds.push_back(h);
    start_monitor(h);
    co_return std::make_tuple(std::error_code{}, lock(h));
  }
}

// queue_up, or lock_timeout at the deadline. (Its own frame: a waiter
// without a deadline carries no timer.)
awaitable<std::tuple<std::error_code, lock>> queue_up_until(std::shared_ptr<mutex_state> m,
                                                            std::optional<owner> who, bool try_once,
                                                            attempt& a,
                                                            std::chrono::steady_clock::time_point deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto raced = co_await (queue_up(std::move(m), who, try_once, a) || timer.async_wait(use_awaitable));
  if (raced.index() == 0) co_return std::move(std::get<0>(raced));
  co_return std::make_tuple(make_error_code(error::lock_timeout), lock{});
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
asio::any_io_executor lock::get_executor() const {
  if (!mutex_) throw std::system_error(make_error_code(error::not_held), "a lock that never held");
  return mutex_->strand;
}

asio::awaitable<std::tuple<std::error_code>> lock::release_coroutine(
    std::shared_ptr<detail::hold> hold) {
  if (!hold || hold->released) co_return std::make_tuple(make_error_code(error::not_held));
  if (--hold->grants > 0) co_return std::make_tuple(std::error_code{});
  bool was_lost = hold->lost;
  hold->released = true;  // the monitor stays until the delete: the delete ends its watch
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
        hold->stop_monitor.emit(asio::cancellation_type::terminal);
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
    : state_(std::make_shared<detail::mutex_state>(s, std::string(path), std::move(options))) {
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
    // (Not a conditional expression: g++ 12 runs the co_awaits of both branches.)
    if (deadline) result = co_await queue_up_until(state, who, try_once, a, *deadline);
    else result = co_await queue_up(state, who, try_once, a);
  } catch (const std::system_error& e) {
    std::get<0>(result) = e.code();
  }
  auto& [ec, granted] = result;
  if (ec == error::lock_busy) {
    // try_acquire leaves no node behind by the time it reports.
    try {
      co_await delete_node(state, state->path + "/" + a.node.name, a.generation);
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
