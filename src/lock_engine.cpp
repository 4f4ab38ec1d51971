#include <zkasio/detail/lock_engine.hpp>

#include <asio/bind_executor.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <list>
#include <zkasio/detail/known_nodes.hpp>
#include <zkasio/detail/busy_backoff.hpp>
#include <zkasio/detail/local_turns.hpp>
#include <zkasio/detail/lock_queue.hpp>
#include <zkasio/detail/strand_latch.hpp>

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
struct hold;

// The mutex's strand. Over an io_context's own executor when that is what the
// session runs on: such a strand fits in any_io_executor's small buffer, so
// the copies that every waiting coroutine makes allocate nothing.
lock_strand make_lock_strand(const asio::any_io_executor& executor) {
  if (auto* io = executor.target<asio::io_context::executor_type>()) return asio::make_strand(*io);
  return asio::make_strand(executor);
}

struct engine_state {
  engine_state(session& owner, std::string path, lock_options options, queue_family family,
               std::optional<lock_strand> shared_strand)
      : s(session_access::view(owner)), core(session_access::core(owner)), path(std::move(path)), options(std::move(options)), family(family),
        strand(shared_strand ? *shared_strand : make_lock_strand(s.get_executor())),
        known(known_nodes::of(s.hosts(), this->path)),
        turns(family == queue_family::race ? local_turns::of(s.hosts(), this->path) : nullptr) {}
  session s;  // a view: what outlives the user's session object gets session_closed
  // The session's core, named while the session object lived: the key of its
  // lines in known_nodes and local_turns (session_in), which must still match
  // when the session ends by the object's destruction (core(s) is null then).
  std::weak_ptr<const session_core> core;
  std::string path;
  lock_options options;
  queue_family family;  // the recipe's node kinds
  lock_strand strand;
  std::vector<std::weak_ptr<hold>> holds;  // live holds, for reentrancy by owner
  std::shared_ptr<known_nodes> known;
  std::shared_ptr<local_turns> turns;  // the race recipes' (see local_turns.hpp)
  std::shared_ptr<listing_round> next_listing;  // not sent yet: contenders may join it
  bool listing_in_flight = false;  // sent, not answered (see fresh_listing)
  busy_backoff busy;  // the pause before asking a busy server again (until_retry)
  // Withdraws report_session_end's wait (emitted on the strand).
  std::shared_ptr<asio::cancellation_signal> stop_reporting = std::make_shared<asio::cancellation_signal>();

  ~engine_state() {
    asio::dispatch(strand, [stop = stop_reporting] { stop->emit(asio::cancellation_type::terminal); });
  }

  // A contender's node by its name under the path; "": the race recipes'
  // node, which is the path itself.
  std::string full(std::string_view name) const { return name.empty() ? path : path + "/" + std::string(name); }
  session_ref session_in(std::uint64_t generation) const {
    return {core, generation};
  }
};

// A listing of the lock's children shared by the contenders that asked for
// one before it was sent.
struct listing_round {
  explicit listing_round(const lock_strand& strand) : ready(strand) {}
  strand_latch ready;  // set when the reply is in
  std::error_code ec;
  std::shared_ptr<const queue_view> view;
};

// A node held, shared by the grants of one owner (reentrancy). Touched on the
// mutex's strand, but for the flags that observers read from any thread.
struct hold {
  std::shared_ptr<engine_state> engine;
  std::string name;  // under the lock path
  std::string node;  // full path
  node_kind kind = node_kind::lock;
  std::int64_t czxid = 0;
  std::int32_t version = 0;
  std::int64_t owner_id = 0;  // the node's ephemeral owner
  std::optional<owner> who;
  int grants = 0;  // lock objects holding it
  std::vector<std::weak_ptr<grant>> grant_list;
  std::atomic<bool> released{false};
  std::atomic<bool> lost{false};
  asio::cancellation_signal stop_monitor;
  std::shared_ptr<local_turns::turn> turn;  // a race hold's, until its node is deleted
};

// One lock object's share of a hold: its own lost signal.
// Its share of the hold is given back when released, or else when it is
// destroyed (a lock object dropped, or an async_release never started).
struct grant {
  std::shared_ptr<hold> held;
  asio::cancellation_signal lost_signal;
  // lost_slot()'s after the loss: each emitted once its caller has bound it,
  // then dropped once nothing is bound to it any more. On the strand.
  struct late_signal {
    asio::cancellation_signal signal;
    bool emitted = false;
  };
  std::list<late_signal> late_signals;
  std::vector<completion_ptr<>> lost_waiters;  // async_wait_lost's; on the strand
  bool given_back = false;  // on the strand
  ~grant();
  // Completes every async_wait_lost with `ec`. On the strand.
  void end_lost_waits(std::error_code ec) {
    for (auto& done : std::exchange(lost_waiters, {})) done->complete(ec);
  }
};

namespace {

// Errors that mean the node went with the session.
bool session_gone(std::error_code ec) {
  return ec == error::session_expired || ec == error::session_closed || ec == error::auth_failed;
}

// Why a holder may no longer hold.
enum class loss {
  none,            // the monitor was stopped (released)
  node_gone,       // the node was deleted: known gone
  session_over,    // the session expired (or its authentication failed): its nodes are gone
  session_closed,  // closed by its owner: its nodes go at once, or (closed while
                   // disconnected) when the server expires it
  may_be_lost,     // revoked, or the policy's deadline: the node may still be there
};

loss loss_of(std::error_code ec) {
  // (A session whose authentication failed lives on the server until it expires.)
  if (ec == error::session_closed || ec == error::auth_failed) return loss::session_closed;
  return ec == error::session_expired ? loss::session_over : loss::may_be_lost;
}

void lose(hold& h, loss why) {
  if (why == loss::none || h.released) return;
  if (why == loss::node_gone || why == loss::session_over) h.engine->known->gone(h.name);
  if (h.lost.exchange(true)) return;
  // A handler may release its own grant (and so edit the list) as it runs.
  std::vector<std::shared_ptr<grant>> grants;
  for (auto& weak : h.grant_list)
    if (auto g = weak.lock()) grants.push_back(std::move(g));
  for (auto& g : grants) {
    g->lost_signal.emit(asio::cancellation_type::terminal);
    g->end_lost_waits({});
  }
}

// Runs `work` on `strand` to its end whatever happens to whoever waits for it
// (a delete must go on when its caller gives up). Started at once.
template <class T>
class background {
 public:
  background(const lock_strand& strand, awaitable<T> work)
      : shared_(std::make_shared<outcome>(strand)) {
    asio::co_spawn(
        strand,
        [](awaitable<T> work, std::shared_ptr<outcome> o) -> awaitable<void> {
          o->result = co_await std::move(work);
          o->finished.set();
        }(std::move(work), shared_),
        asio::detached);
  }
  // Its result; nullopt when this wait was cancelled first.
  awaitable<std::optional<T>> wait() {
    auto o = shared_;
    co_await o->finished.async_wait(as_tuple(use_awaitable));
    co_return o->result;
  }

 private:
  struct outcome {
    explicit outcome(const lock_strand& strand) : finished(strand) {}
    strand_latch finished;
    std::optional<T> result;
  };
  std::shared_ptr<outcome> shared_;
};

// Sends the listing contenders are waiting to share (next_listing), if any;
// it is in flight until its reply. On the strand.
void send_next_listing(const std::shared_ptr<engine_state>& m) {
  auto round = std::exchange(m->next_listing, nullptr);
  if (!round) return;
  m->listing_in_flight = true;
  m->s.async_get_children(m->path, asio::bind_executor(m->strand, [m, round](std::error_code ec, children kids) {
    round->ec = ec;
    if (!ec) round->view = std::make_shared<const queue_view>(m->known->view(lock_queue(kids.names, m->family)));
    round->ready.set();
    m->listing_in_flight = false;
    send_next_listing(m);
  }));
}

// A listing sent after every request submitted so far (a session's requests
// run in order): contenders that ask before it goes out share it. At most
// one is in flight per mutex object; those who ask meanwhile share the next,
// sent when its reply is in: after a cut, thousands of contenders whose
// replies trickle in would otherwise each send one, and thousands of
// listings of thousands of names are gigabytes.
//
// Relies on the order of replies: see send_create.
awaitable<std::tuple<std::error_code, std::shared_ptr<const queue_view>>> fresh_listing(
    std::shared_ptr<engine_state> m) {
  auto round = m->next_listing;
  if (!round) {
    round = m->next_listing = std::make_shared<listing_round>(m->strand);
    // Posted: the creates of every contender that runs before it go out first.
    if (!m->listing_in_flight) asio::post(m->strand, [m] { send_next_listing(m); });
  }
  co_await round->ready.async_wait(as_tuple(use_awaitable));
  if (!round->ready.is_set())
    co_return std::make_tuple(std::error_code(asio::error::operation_aborted), nullptr);
  co_return std::make_tuple(round->ec, round->view);
}

// Waits until a request that failed with `ec` (retryable; or none yet) may
// be asked again: once connected, and after a server's busy answer
// (throttled_op, session_moved: the connection stands) a pause first (see
// busy_backoff.hpp). The session's error if it is over; operation_aborted
// if cancelled during the pause.
awaitable<std::error_code> until_retry(std::shared_ptr<engine_state> m, std::error_code ec) {
  if (ec == error::throttled_op || ec == error::session_moved) {
    asio::steady_timer pause(m->strand, m->busy.next(std::chrono::steady_clock::now()));
    if (auto [pause_ec] = co_await pause.async_wait(as_tuple(use_awaitable)); pause_ec) co_return pause_ec;
  }
  auto [connect_ec] = co_await m->s.async_connect(as_tuple(use_awaitable));
  co_return connect_ec;
}

// Deletes `name` (a node this process created for the ephemeral owner
// `owner_id`), retrying after connection losses while that session lives;
// never another session's node. lock_lost when it was gone already (or went
// with its session); a retry that finds it gone counts as deleted: the
// first attempt took effect.
//
// The race recipes' node (`name` empty) is one path that every holder
// creates in turn: it is deleted only while it is still this session's and,
// when `czxid` is known, the same incarnation. (Only an operator's delete and
// another session's create between that check and the delete escape it.)
awaitable<std::error_code> delete_node(std::shared_ptr<engine_state> m, std::string name,
                                       std::int64_t owner_id, std::int64_t czxid = 0) {
  auto& s = m->s;
  for (bool retry = false;; retry = true) {
    if (s.id() != owner_id) {  // a later ZooKeeper session: the node went with its own
      m->known->gone(name);
      co_return make_error_code(error::lock_lost);
    }
    std::error_code ec;
    if (name.empty()) {
      auto [stat_ec, st] = co_await s.async_exists(m->path, as_tuple(use_awaitable));
      ec = stat_ec;
      if (!ec && (!st || st->ephemeral_owner != owner_id || (czxid != 0 && st->czxid != czxid)))
        co_return retry ? std::error_code{} : make_error_code(error::lock_lost);
    }
    if (!ec) std::tie(ec) = co_await s.async_remove(m->full(name), as_tuple(use_awaitable));
    // (Closed while disconnected, a session's nodes live until it expires.)
    if (!ec || ec == error::no_node || loss_of(ec) == loss::session_over) m->known->gone(name);
    if (!ec || (ec == error::no_node && retry)) co_return std::error_code{};
    if (ec == error::no_node || session_gone(ec)) co_return make_error_code(error::lock_lost);
    if (ec != condition::retryable) co_return ec;
    if (auto connect_ec = co_await until_retry(m, ec)) {
      if (loss_of(connect_ec) == loss::session_over) m->known->gone(name);
      co_return make_error_code(error::lock_lost);
    }
  }
}

// A create's outcome, filled in by its completion. Shared: a cancelled
// acquire may be gone before the reply comes.
struct create_reply {
  bool done = false;
  bool abandoned = false;  // its acquire ended first: the node is not adopted (its cleanup deletes it)
  std::error_code ec;
  lock_node node;
  node_stat stat;
};

// What an acquire knows of its node.
struct attempt {
  node_kind kind = node_kind::lock;
  // A downgrade (a write holder's read lock): the node takes the write node's
  // sequence (a plain ephemeral create) so that no writer queued behind the
  // write lock can pass the read lock; the write node does not block it.
  std::optional<std::string> downgrade_of{};  // the write node's name
  std::string uuid{};
  std::string data{};  // written into the node
  // Granted only once its node is seen owned by this session (an election:
  // Curator's CURATOR-696 granted leadership on a node of an earlier session).
  bool confirm_owner = false;
  std::uint64_t generation = 0;  // of the session when the create was sent
  bool submitted = false;        // a create may have taken effect
  bool gone = false;             // the node is known to be gone
  lock_node node;                // once known
  node_stat stat;                // its ephemeral_owner tells whose it is
  std::shared_ptr<create_reply> reply{};  // of the latest create
  std::shared_ptr<local_turns::turn> turn{};  // a race contender's (see local_turns.hpp)
  // A race contender's session id in `generation`: a node it owns is this
  // attempt's (with the turn). Not s.id() read later: a reply may be
  // answered after the session expired and the next one began, whose own
  // contender's node is not this attempt's. (Fair nodes carry their uuid.)
  std::int64_t session_id = 0;
};

attempt fresh_attempt(const engine_state& m, const acquire_request& request) {
  return {.kind = request.kind,
          .uuid = make_uuid(),
          .data = request.data.value_or(m.options.data),
          .confirm_owner = request.confirm_owner,
          .node = {},
          .stat = {}};
}

// The node of its own owner that does not block an attempt.
std::string_view exempt(const attempt& a) {
  return a.downgrade_of ? std::string_view(*a.downgrade_of) : std::string_view();
}

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

// Watches the holder's node: deleted, or revoked (Curator's protocol).
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
    if (ec) co_return loss_of(ec);
    if (event == event_type::deleted) co_return loss::node_gone;
    auto [read_ec, data] = co_await s.async_get_data(h->node, as_tuple(use_awaitable));
    if (read_ec == asio::error::operation_aborted) co_return loss::none;
    if (read_ec == error::no_node || (!read_ec && data.stat.czxid != h->czxid)) co_return loss::node_gone;
    if (read_ec || data.data == revoke_message) co_return loss_of(read_ec);
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

// Whether a grant may be made now. Not past sure_until: the replies that
// decided it may have waited (this process paused, or a reply held up)
// while the server expired the session and granted the next in line. Then
// the acquire asks again after a sync sent now: its answer, which comes
// through the leader, moves last_contact (a read's answer does not: a
// follower answers reads alone). Also for reentry: a hold past sure_until
// may be lost, whether or not its monitor has said so yet.
bool session_sure(const engine_state& m) { return std::chrono::steady_clock::now() < sure_until(m); }

// Why no grant can ever be sure (session_sure), if none can: a margin not
// below the timeout. (Asked when a grant was not sure: such a margin would
// have the acquire look again for ever.)
std::error_code never_sure(const engine_state& m) {
  if (m.options.safety_margin < m.s.negotiated_timeout()) return {};
  return make_error_code(error::invalid_safety_margin);
}

// Watches the holder's session: over, or closed; with `deadlines`, also
// disconnected under on_suspend, or not confirmed by the ensemble's leader
// for so long that the server could expire it a safety margin from now
// (session::last_contact: connected or not, since a follower that lost its
// leader goes on answering for a while).
awaitable<loss> watch_session(std::shared_ptr<hold> h, std::uint64_t generation, bool deadlines) {
  auto& s = h->engine->s;
  auto& options = h->engine->options;
  asio::steady_timer deadline(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  auto state = s.state();
  for (;;) {
    if (s.generation() != generation || state == session_state::expired) co_return loss::session_over;
    if (state == session_state::closed || state == session_state::auth_failed) co_return loss::session_closed;
    if (deadlines) {
      if (state == session_state::suspended && options.policy == lost_policy::on_suspend)
        co_return loss::may_be_lost;
      // The server cannot expire the session before its last sight of it
      // plus the timeout: fire a margin before that.
      auto latest = sure_until(*h->engine);
      if (std::chrono::steady_clock::now() >= latest) co_return loss::may_be_lost;
      deadline.expires_at(latest);
    }
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

loss either(std::variant<loss, loss> why) {
  return std::visit([](loss l) { return l; }, why);
}

// Watches what can take the lock away, until released: once the lock may be
// lost (its node possibly still there), until its node is known gone, so
// that the waiters behind it learn that (see known_nodes).
awaitable<void> monitor(std::shared_ptr<hold> h, std::uint64_t generation) {
  auto why = either(co_await (watch_node(h) || watch_session(h, generation, true)));
  lose(*h, why);
  if (why == loss::may_be_lost) lose(*h, either(co_await (node_gone(h) || watch_session(h, generation, false))));
}

void start_monitor(const std::shared_ptr<hold>& h, std::uint64_t generation) {
  // The handler keeps the hold (and so its signals) alive until the monitor
  // has let go of the slot.
  asio::co_spawn(h->engine->strand, monitor(h, generation),
                 asio::bind_cancellation_slot(h->stop_monitor.slot(), [h](std::exception_ptr) {}));
}

// A new lock object sharing `h`.
lock grant_of(const std::shared_ptr<hold>& h) {
  auto g = std::make_shared<grant>();
  g->held = h;
  ++h->grants;
  std::erase_if(h->grant_list, [](auto& weak) { return weak.expired(); });
  h->grant_list.push_back(g);
  return lock(std::move(g));
}

// Gives one grant's share of `h` back: the last one deletes the node (in the
// background, so that it goes on when this wait is cancelled: then
// operation_aborted). lock_lost when the lock had been lost.
awaitable<std::error_code> give_back(std::shared_ptr<hold> h) {
  if (--h->grants > 0) co_return h->lost ? make_error_code(error::lock_lost) : std::error_code{};
  bool was_lost = h->lost;
  h->released = true;  // the monitor stays until the delete: the delete ends its watch
  std::erase_if(h->engine->holds, [&](auto& w) { return w.expired() || w.lock() == h; });
  background<std::error_code> deleting(h->engine->strand, [](std::shared_ptr<hold> h) -> awaitable<std::error_code> {
    auto ec = co_await delete_node(h->engine, h->name, h->owner_id, h->czxid);
    h->stop_monitor.emit(asio::cancellation_type::terminal);
    h->turn.reset();  // (a race hold: the next of its session may create the node now)
    co_return ec;
  }(h));
  auto result = co_await deleting.wait();
  if (!result) co_return std::error_code(asio::error::operation_aborted);
  if (!*result && was_lost) co_return make_error_code(error::lock_lost);
  co_return *result;
}

// The ACL of the nodes the engine creates (lock_options::node_acl).
acl node_acl(const engine_state& m) {
  if (m.options.node_acl) return *m.options.node_acl;
  return m.s.authenticated() ? creator_all_world_read_acl() : open_acl_unsafe();
}

// Creates `path` and its parents when missing, as containers.
awaitable<std::error_code> create_parents(engine_state& m, const std::string& path) {
  const create_options container(create_mode::container, node_acl(m));
  for (auto slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    auto parent = path.substr(0, slash);
    auto [ec, made] = co_await m.s.async_create(parent, "", container, as_tuple(use_awaitable));
    if (ec && ec != error::node_exists) co_return ec;
    if (slash == std::string::npos) co_return std::error_code{};
  }
}

using listing = std::tuple<std::error_code, std::shared_ptr<const queue_view>>;


// Sends the create of `a`'s node. Its completion adopts the node (known_nodes)
// before the completion of any listing sent after it runs, so that listing's
// view counts the node as known. That order holds because (1) the session
// submits requests in the order they reach its strand, and the listing is
// submitted after the create (fresh_listing); (2) a session's replies come in
// the order of its requests and the C client completes them in that order
// (session_impl); (3) each completion is posted, never run inline, to the
// handler's executor (completion.hpp); (4) both handlers are bound to this
// mutex's strand, which runs what is posted to it in order. test_session's
// "completions of one session run in the order of its requests" breaks if
// any of these changes.
std::shared_ptr<create_reply> send_create(const std::shared_ptr<engine_state>& m, attempt& a) {
  auto reply = a.reply = std::make_shared<create_reply>();
  auto name = lock_node_prefix(a.uuid, a.kind);
  create_options mode(create_mode::ephemeral_sequential, node_acl(*m));
  if (a.downgrade_of) {
    auto write = lock_name(node_kind::write);
    name += a.downgrade_of->substr(a.downgrade_of->find(write) + write.size());  // its sequence
    mode.mode = create_mode::ephemeral;
  }
  m->s.async_create(m->full(name), a.data, mode,
                     asio::bind_executor(m->strand, [m, reply, owner = m->session_in(a.generation),
                                                     beside = std::string(exempt(a))](std::error_code ec,
                                                                                      created made) {
                       reply->done = true;
                       reply->ec = ec;
                       if (ec) return;
                       auto name = std::string_view(made.path).substr(m->path.size() + 1);
                       reply->stat = made.stat;
                       if (auto node = parse_lock_node(name)) {
                         reply->node = std::move(*node);
                         if (!reply->abandoned) m->known->add(reply->node, owner, beside);
                       } else {  // the server named it as no server does: delete it by name
                         reply->node.name = std::string(name);
                         reply->ec = make_error_code(error::system_error);
                       }
                     }));
  return reply;
}

// Whether a failure is one the acquire rides through: the connection was
// lost or the server was busy, and the session lives on, so its node (made,
// or being looked up) is still in the queue. It waits for the connection
// and asks again, for as long as its deadline allows.
bool ride_through(std::error_code ec, const session& s, const attempt& a) {
  return ec == condition::retryable && s.generation() == a.generation;
}

// Makes `path` and its parents for attempt `a`, whose create found none.
// Cut off meanwhile, it waits for the connection, and the caller creates
// again (in the same session; parents are shared containers: nothing to
// undo).
awaitable<std::error_code> make_parents(std::shared_ptr<engine_state> m, std::string path, const attempt& a) {
  auto ec = co_await create_parents(*m, path);
  if (!ride_through(ec, m->s, a)) co_return ec;
  if (auto connect_ec = co_await until_retry(m, ec)) co_return connect_ec;
  co_return m->s.generation() == a.generation ? std::error_code{} : make_error_code(error::session_expired);
}

// After a lost create reply the create may have been applied: finds the node
// by its uuid, owned by the current session. nullopt: it is not there: create
// again. session_expired when the session expired meanwhile: the node, if it
// was made, went with it, and like every waiter of that session this one
// ends (it is not queued again in the next session). `create_ec`: how the
// create failed (a busy server's answer: a pause first, see until_retry).
// (A coroutine of its own, so that a waiter's frame does not carry all this.)
awaitable<std::optional<listing>> find_lost_node(std::shared_ptr<engine_state> m, attempt& a,
                                                 std::error_code create_ec) {
  auto& s = m->s;
  auto expired = [&] { return s.generation() != a.generation; };
  // Asked again while the connection fails (a lookup cut off is not an
  // answer): `failed` is the last request's error, create_ec at first.
  for (std::error_code failed = create_ec;;) {
    if (auto connect_ec = co_await until_retry(m, failed)) co_return listing(connect_ec, nullptr);
    if (expired()) co_return listing(make_error_code(error::session_expired), nullptr);
    // Reconnected maybe to another server: it must have seen the create, if
    // the leader applied it, before it is asked.
    std::tie(failed) = co_await s.async_sync(m->path, as_tuple(use_awaitable));
    if (ride_through(failed, s, a)) continue;
    if (failed && failed != error::no_node) co_return listing(failed, nullptr);
    // (Shared: after a cut, every contender whose create was in flight looks;
    // thousands of listings of thousands of names would be gigabytes.)
    std::shared_ptr<const queue_view> view;
    std::tie(failed, view) = co_await fresh_listing(m);
    // (A listing answered in a later session would not show the node either.)
    if (expired()) co_return listing(make_error_code(error::session_expired), nullptr);
    if (ride_through(failed, s, a)) continue;
    if (failed == error::no_node) co_return std::nullopt;  // the parent went (a container): so did the node
    if (failed) co_return listing(failed, nullptr);
    auto found = find_by_uuid(view->nodes, a.uuid);
    if (!found) co_return std::nullopt;
    std::optional<node_stat> st;
    std::tie(failed, st) = co_await s.async_exists(m->full(found->name), as_tuple(use_awaitable));
    if (expired()) co_return listing(make_error_code(error::session_expired), nullptr);
    if (ride_through(failed, s, a)) continue;
    if (failed) co_return listing(failed, nullptr);
    if (!st || st->ephemeral_owner != s.id()) co_return std::nullopt;
    a.node = *found;
    a.stat = *st;
    m->known->add(a.node, m->session_in(a.generation), exempt(a));
    // The shared view was made before the contenders it answers knew their
    // nodes: the part up to mine (all a decision reads) is made again with
    // what is known now, lest nodes before mine that this process knows make
    // me list again once my predecessor goes. (One at a time on the strand:
    // a decision drops its view before the next.)
    auto mine = static_cast<std::size_t>(found - view->nodes.data());
    if (view->others_before[mine] > 0)
      view = std::make_shared<const queue_view>(
          m->known->view({view->nodes.begin(), view->nodes.begin() + static_cast<std::ptrdiff_t>(mine) + 1}));
    co_return listing(std::error_code{}, std::move(view));
  }
}

// After a failed or cancelled acquire: deletes the attempt's node if its
// create took effect: by name when its reply came, else found by uuid (a
// session's requests run in order, so a listing sent now sees a node created
// before). Only a node whose ephemeral owner is the current session: a node
// of an earlier session of this one went with it, and a node of another
// process never carries our uuid (and is never taken for ours if it did).
awaitable<std::error_code> remove_attempt_node(std::shared_ptr<engine_state> m, attempt a) {
  // No reply yet: found as after a lost reply. (The reply, if it comes, comes
  // before the lookup's listing, which shows the node then.)
  if (a.node.name.empty()) {
    auto found = co_await find_lost_node(m, a, {});
    if (!found) co_return std::error_code{};  // not made, or gone already
    // The session over: so is the node.
    if (auto ec = std::get<0>(*found)) co_return ec == error::session_expired ? std::error_code{} : ec;
  }
  if (a.gone) co_return std::error_code{};
  co_return co_await delete_node(m, a.node.name, a.stat.ephemeral_owner);
}

// After a request of the acquire failed with `ec`: lists again once it may
// (until_retry).
awaitable<listing> relist_when_connected(std::shared_ptr<engine_state> m, std::error_code ec) {
  if (auto connect_ec = co_await until_retry(m, ec)) co_return listing(connect_ec, nullptr);
  co_return co_await fresh_listing(m);
}

// Creates this attempt's node and lists the queue in one round trip; after a
// lost create reply finds the node by its uuid (and only in this session).
awaitable<listing> create_node(std::shared_ptr<engine_state> m, attempt& a) {
  auto& s = m->s;
  for (int parents_made = 0;;) {
    a.generation = s.generation();
    a.submitted = true;
    auto reply = send_create(m, a);
    auto listed = co_await fresh_listing(m);
    if (!reply->done) {  // cancelled, or the listing refused at once: the caller deletes by uuid
      if (!std::get<0>(listed)) std::get<0>(listed) = make_error_code(error::system_error);
      co_return listed;
    }
    a.node = reply->node;
    a.stat = reply->stat;
    auto create_ec = reply->ec;
    if (!create_ec) {
      if (auto list_ec = std::get<0>(listed)) listed = co_await relist_when_connected(m, list_ec);
      co_return listed;
    }
    // No parent: create it (as a container, which the server may remove again
    // once empty, so more than once, but not for ever).
    if (create_ec == error::no_node && parents_made++ < 3) {
      if (auto ec = co_await make_parents(m, m->path, a)) co_return listing(ec, nullptr);
      continue;
    }
    // A connection lost (or a request timed out) before the reply: the
    // create may have been applied.
    if (create_ec != condition::retryable) co_return listing(create_ec, nullptr);
    if (auto found = co_await find_lost_node(m, a, create_ec)) co_return std::move(*found);
  }
}

// A wait in this process (known_nodes', local_turns'): `start(done)`
// registers the completion `done`, which is completed on the engine's strand;
// cancelling the wait withdraws it there.
template <class Start>
awaitable<std::error_code> wait_here(const std::shared_ptr<engine_state>& m, Start start) {
  auto token = as_tuple(use_awaitable);
  auto [ec] = co_await asio::async_initiate<decltype(token), void(std::error_code)>(
      [&](auto handler) { start(make_completion<>(std::move(handler), m->strand, m->strand, read_cancellation)); },
      token);
  co_return ec;
}

// Waits for the node `name` to go: in this process when it is a node of the
// same session (see known_nodes), else with a watch on the server.
awaitable<std::error_code> wait_gone(std::shared_ptr<engine_state> m, const attempt& a, const std::string& name) {
  if (m->known->owned_by(name, m->session_in(a.generation)))
    co_return co_await wait_here(m, [&](completion_ptr<> done) { m->known->wait_gone(name, m->strand, std::move(done)); });
  auto [ec] = co_await m->s.async_wait_deleted(m->full(name), as_tuple(use_awaitable));
  if (!ec) m->known->gone(name);
  co_return ec;
}

enum class turn { first, relist };

// Waits until mine may be first, from the verdict on a listing: first when
// every node known below it went (to be verified: mine may be gone too), or
// relist when the queue must be listed again.
// (The verdict's parts as parameters: g++ 12 may destroy an aggregate passed
// by value in a co_await twice.)
awaitable<std::tuple<std::error_code, turn>> wait_turn(std::shared_ptr<engine_state> m, const attempt& a,
                                                       std::string predecessor, bool relist_after) {
  for (;;) {
    auto ec = co_await wait_gone(m, a, predecessor);
    if (!ec && m->s.generation() != a.generation) ec = make_error_code(error::session_expired);
    if (ec) co_return std::make_tuple(ec, turn::relist);
    if (relist_after) co_return std::make_tuple(std::error_code{}, turn::relist);
    // Only known nodes were below: which of them may still be there is known.
    auto next = m->known->below(a.node, exempt(a));
    if (next.what == known_nodes::below_result::first) co_return std::make_tuple(std::error_code{}, turn::first);
    if (next.what == known_nodes::below_result::relist) co_return std::make_tuple(std::error_code{}, turn::relist);
    predecessor = std::move(next.name);
  }
}

// Whether mine is still there (an operator may have deleted it while it
// waited): a grant needs its node.
awaitable<std::tuple<std::error_code, bool>> still_there(std::shared_ptr<engine_state> m, const attempt& a) {
  auto [ec, st] = co_await m->s.async_exists(m->full(a.node.name), as_tuple(use_awaitable));
  co_return std::make_tuple(ec, !ec && st && st->ephemeral_owner == a.stat.ephemeral_owner &&
                                    st->ephemeral_owner == m->s.id());
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
  h->version = a.stat.version;
  h->owner_id = a.stat.ephemeral_owner;
  h->who = who;
  h->turn = std::move(a.turn);
  m->holds.push_back(h);
  auto first = grant_of(h);
  start_monitor(h, a.generation);
  return first;
}

// The whole acquire: create, then wait in the queue until first.
awaitable<std::tuple<std::error_code, lock>> queue_up(std::shared_ptr<engine_state> m,
                                                      std::optional<owner> who, bool try_once,
                                                      attempt& a) {
  auto& s = m->s;
  if (s.state() != session_state::connected)
    if (auto [ec] = co_await s.async_connect(as_tuple(use_awaitable)); ec)
      co_return std::make_tuple(ec, lock{});
  auto [ec, view] = co_await create_node(m, a);
  for (;;) {
    if (ride_through(ec, s, a) && a.node.name.size()) {
      std::tie(ec, view) = co_await relist_when_connected(m, ec);
      continue;
    }
    if (ec) co_return std::make_tuple(ec, lock{});
    if (s.generation() != a.generation)
      co_return std::make_tuple(make_error_code(error::session_expired), lock{});
    auto verdict = decide(*view, a.node, exempt(a));
    view.reset();  // a waiter keeps no listing: there may be thousands of both
    if (verdict.what == lock_verdict::missing) {
      a.gone = true;
      m->known->gone(a.node.name);
      co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
    }
    if (verdict.what == lock_verdict::wait && try_once)
      co_return std::make_tuple(make_error_code(error::lock_busy), lock{});
    bool relisted = false;
    if (verdict.what == lock_verdict::wait) {
      auto [wait_ec, next] = co_await wait_turn(m, a, std::move(verdict.predecessor), verdict.relist_after);
      std::error_code cut_off;
      if (ride_through(wait_ec, s, a)) cut_off = std::exchange(wait_ec, {});
      if (wait_ec) co_return std::make_tuple(wait_ec, lock{});
      relisted = next == turn::relist;
      if (relisted) std::tie(ec, view) = co_await relist_when_connected(m, cut_off);
    }
    if (relisted) continue;
    // First by what this process knows (a listing would have shown mine), or
    // an election's candidate, which checks whose the node is.
    if (verdict.what == lock_verdict::wait || a.confirm_owner) {
      auto [check_ec, there] = co_await still_there(m, a);
      if (ride_through(check_ec, s, a)) {
        std::tie(ec, view) = co_await relist_when_connected(m, check_ec);
        continue;
      }
      if (check_ec) co_return std::make_tuple(check_ec, lock{});
      if (!there) {
        a.gone = true;
        m->known->gone(a.node.name);
        co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
      }
    }
    // A downgrade is granted only if its write node is still there once the
    // read node is known (see known_nodes): a writer of this process that saw
    // the write node go before would not have seen the read node.
    // (After a sync: the server answering may lag behind the leader.)
    // (Cut off, it lists again and decides again, as above.)
    if (a.downgrade_of) {
      auto [sync_ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
      if (ride_through(sync_ec, s, a)) {
        std::tie(ec, view) = co_await relist_when_connected(m, sync_ec);
        continue;
      }
      if (sync_ec) co_return std::make_tuple(sync_ec, lock{});
      auto [check_ec, st] = co_await s.async_exists(m->full(*a.downgrade_of), as_tuple(use_awaitable));
      if (ride_through(check_ec, s, a)) {
        std::tie(ec, view) = co_await relist_when_connected(m, check_ec);
        continue;
      }
      if (check_ec) co_return std::make_tuple(check_ec, lock{});
      if (!st || st->ephemeral_owner != a.stat.ephemeral_owner)
        co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
    }
    if (!session_sure(*m)) {  // decided on replies too old: decided again, after a sync
      if (auto never = never_sure(*m)) co_return std::make_tuple(never, lock{});
      auto [sync_ec] = co_await s.async_sync(m->path, as_tuple(use_awaitable));
      std::tie(ec, view) = co_await relist_when_connected(m, sync_ec);
      continue;
    }
    co_return std::make_tuple(std::error_code{}, granted(m, a, who));
  }
}

// `work`, or lock_timeout at the deadline. (A frame of its own: a waiter
// without a deadline carries no timer.)
template <class Result>
awaitable<Result> until(awaitable<Result> work, std::chrono::steady_clock::time_point deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  // The timer never throws: cancelled, both branches would fail, and `||`
  // would throw neither's exception but multiple_exceptions.
  auto raced = co_await (std::move(work) || timer.async_wait(as_tuple(use_awaitable)));
  if (raced.index() == 0) co_return std::move(std::get<0>(raced));
  auto [timer_ec] = std::get<1>(raced);
  Result result{};
  std::get<0>(result) = timer_ec ? std::error_code(asio::error::operation_aborted) : make_error_code(error::lock_timeout);
  co_return result;
}

// Every operation that creates nodes sees any cancellation as terminal from
// the time it runs (it has no effect left after one: its nodes go), partial
// cancellation included; true if one came before it ran.
awaitable<bool> cancelled_already() {
  // A cancellation that came before this coroutine ran is in the state that
  // the reset replaces. (The deadline's `||` passes only terminal
  // cancellation on: a partial one would be dropped there, and with it every
  // later one.)
  auto early = (co_await asio::this_coro::cancellation_state).cancelled();
  co_await asio::this_coro::reset_cancellation_state(
      asio::enable_partial_cancellation(), [](asio::cancellation_type type) {
        return type != asio::cancellation_type::none ? asio::cancellation_type::terminal : type;
      });
  co_return early != asio::cancellation_type::none;
}

// After a failed or cancelled acquire of `attempts`: nothing may be left
// behind. Each node goes, wherever the failure or cancellation struck, in the
// background (cancellation is prompt). Not a coroutine: its removals start
// even in a coroutine whose next co_await would throw, cancelled.
std::vector<background<std::error_code>> discard(const std::shared_ptr<engine_state>& m,
                                                 std::vector<attempt> attempts) {
  std::vector<background<std::error_code>> removing;
  for (auto& a : attempts) {
    if (a.reply && !a.reply->done) a.reply->abandoned = true;
    if (a.submitted) removing.emplace_back(m->strand, remove_attempt_node(m, std::move(a)));
  }
  return removing;
}

// After lock_busy (a try), the nodes are gone by the time it reports: waits
// for `removing`; operation_aborted if that wait was cancelled (they go on).
// (Cancelled, a co_await throws: the caller catches.)
awaitable<std::error_code> busy_after(std::vector<background<std::error_code>> removing) {
  for (auto& r : removing)
    if (!co_await r.wait()) co_return std::error_code(asio::error::operation_aborted);
  co_return make_error_code(error::lock_busy);
}

// One acquire's I/O, `work`, run under `deadline`, its failures and
// cancellation (thrown by a cancelled co_await) reported in its result; if it
// failed, `remove()` starts the removal of its nodes in the background, and
// after lock_busy the result waits for them (busy_after). Never throws.
// (`remove` is called only then; `work` and `remove` may share the caller's
// attempt.)
template <class Remove>
awaitable<std::tuple<std::error_code, lock>> settle(awaitable<std::tuple<std::error_code, lock>> work,
                                                   std::optional<std::chrono::steady_clock::time_point> deadline,
                                                   Remove remove) {
  std::tuple<std::error_code, lock> result;
  auto& ec = std::get<0>(result);
  try {
    // (Not a conditional expression: g++ 12 runs the co_awaits of both branches.)
    if (deadline) result = co_await until(std::move(work), *deadline);
    else result = co_await std::move(work);
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  if (!ec) co_return result;
  auto removing = remove();
  if (ec != error::lock_busy) co_return result;
  try {
    ec = co_await busy_after(std::move(removing));
  } catch (const std::system_error&) {
    ec = asio::error::operation_aborted;
  }
  co_return result;
}

// With lock_options::requeue_on_expiry, an acquire whose session expired
// while it waited (its node went with the session; it held nothing) queues
// again, as a new attempt, in the session that follows, within the same
// deadline. Not a try, and not without a session to follow: closed, or
// expired for good (reconnect_on_expiry off). `generation`: the attempt's
// session. (A session that will reconnect counts the new generation before
// it says expired, session_impl::on_unrecoverable: so a new generation tells
// from any thread that a session follows, where the state alone may still
// say expired.)
bool queue_again(std::error_code ec, const engine_state& m, bool try_once, std::uint64_t generation) {
  auto state = m.s.state();
  bool session_follows = state != session_state::closed &&
                         (m.s.generation() != generation || state != session_state::expired);
  return ec == error::session_expired && m.options.requeue_on_expiry && !try_once && session_follows;
}

std::atomic<std::uint64_t> next_owner_id{1};

// Tells known_nodes, and a race recipe's local_turns, when this mutex's
// session ends (see known_nodes.hpp and local_turns.hpp),
// for as long as the mutex lives: one pending state wait per mutex, withdrawn
// by ~engine_state.
void report_session_end(std::weak_ptr<engine_state> weak, session_state known, std::uint64_t generation) {
  auto m = weak.lock();
  if (!m) return;
  m->s.async_wait_state_change(
      known, asio::bind_cancellation_slot(
                 m->stop_reporting->slot(),
                 // (The handler keeps the signal its slot belongs to.)
                 asio::bind_executor(m->strand, [weak, generation, stop = m->stop_reporting](
                                                    std::error_code ec, session_state state) {
                   auto m = weak.lock();
                   if (!m || ec == asio::error::operation_aborted) return;
                   auto ended = [&](std::uint64_t g, bool expired) {
                     m->known->session_ended(m->session_in(g), expired);
                     if (m->turns)
                       m->turns->session_ended({m->core, g},
                                               make_error_code(expired ? error::session_expired : error::session_closed));
                   };
                   // Every generation that passed expired (two may pass
                   // before this handler runs).
                   auto current = m->s.generation();
                   for (auto g = generation; g < current; ++g) ended(g, true);
                   if (state == session_state::expired && current == generation)
                     ended(current, true);  // for good (no reconnect_on_expiry)
                   else if (ec || state == session_state::closed || state == session_state::auth_failed)
                     ended(current, false);
                   if (!ec) report_session_end(weak, state, current);
                 })));
}

}  // namespace
}  // namespace detail

// ----------------------------------------------------------------- owner

owner::owner() : id_(detail::next_owner_id.fetch_add(1, std::memory_order_relaxed)) {}

// ----------------------------------------------------------------- lock

lock::lock(std::shared_ptr<detail::grant> grant) : grant_(std::move(grant)), engine_(grant_->held->engine) {}

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
  // In the background; the delete is retried while the session lives.
  asio::co_spawn(held->engine->strand, give_back(held), asio::detached);
}

void detail::wait_lost(grant& g, completion_ptr<> done) {
  if (g.given_back || g.held->released) return done->complete(make_error_code(error::not_held));
  if (g.held->lost) return done->complete({});
  std::erase_if(g.lost_waiters, [](auto& waiting) { return waiting->done(); });  // cancelled ones
  g.lost_waiters.push_back(std::move(done));
}

bool lock::held() const noexcept { return grant_ && !grant_->held->released.load(std::memory_order_acquire); }
const std::string& lock::node() const {
  static const std::string none;
  return grant_ ? grant_->held->node : none;
}
std::int64_t lock::fencing_token() const { return grant_ ? grant_->held->czxid : 0; }
bool lock::lost() const noexcept { return !grant_ || grant_->held->lost.load(std::memory_order_acquire); }
asio::cancellation_slot lock::lost_slot() {
  if (!grant_) throw std::system_error(make_error_code(error::not_held), "lock::lost_slot");
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
  if (!engine_) throw std::system_error(make_error_code(error::not_held), "a lock that never held");
  return engine_->strand;
}

asio::awaitable<std::tuple<std::error_code>> lock::release_coroutine(std::shared_ptr<detail::grant> grant) {
  if (!grant || grant->given_back) co_return std::make_tuple(make_error_code(error::not_held));
  grant->given_back = true;
  grant->end_lost_waits(make_error_code(error::not_held));
  auto& list = grant->held->grant_list;
  std::erase_if(list, [&](auto& weak) { return weak.expired() || weak.lock() == grant; });
  co_return std::make_tuple(co_await detail::give_back(grant->held));
}

asio::awaitable<std::tuple<std::error_code, std::vector<op_result>>> lock::guarded_multi_coroutine(
    std::shared_ptr<detail::grant> grant, std::vector<multi_op> ops) {
  if (!grant || grant->held->released)
    co_return std::make_tuple(make_error_code(error::not_held), std::vector<op_result>{});
  auto& hold = *grant->held;
  if (hold.name.empty()) co_return std::make_tuple(make_error_code(error::not_fenced), std::vector<op_result>{});
  // (A lock that may be lost, or whose session is another now, writes nothing.)
  if (hold.lost || hold.engine->s.id() != hold.owner_id)
    co_return std::make_tuple(make_error_code(error::lock_lost), std::vector<op_result>{});
  ops.insert(ops.begin(), op::check{hold.node, any_version});
  auto [ec, results] = co_await hold.engine->s.async_multi(std::move(ops), detail::as_tuple(detail::use_awaitable));
  // The check failed: the node is gone, so the lock was lost.
  if (ec == error::no_node && !results.empty() && results.front().error == error::no_node)
    ec = make_error_code(error::lock_lost);
  co_return std::make_tuple(ec, std::move(results));
}

// ----------------------------------------------------------------- engine

namespace detail {

std::shared_ptr<engine_state> make_engine(session& s, std::string_view path, lock_options options,
                                          queue_family family, std::optional<lock_strand> strand) {
  if (auto problem = path_problem(path); !problem.empty())
    throw std::system_error(make_error_code(error::invalid_path), problem);
  if (path == "/")
    throw std::system_error(make_error_code(error::invalid_path), "the root cannot be a lock path");
  auto engine = std::make_shared<engine_state>(s, std::string(path), std::move(options), family, std::move(strand));
  report_session_end(engine, s.state(), s.generation());
  return engine;
}

lock_strand strand_of(const engine_state& engine) { return engine.strand; }
const std::string& path_of(const engine_state& engine) { return engine.path; }
queue_family family_of(const engine_state& engine) { return engine.family; }

namespace {

// What an owner's acquire does with the holds it has on this lock object.
struct reentry {
  enum { none, again, lost, deadlock, downgrade } what = none;
  std::shared_ptr<hold> h{};
};
reentry reentry_of(const engine_state& m, const owner& who, node_kind kind) {
  std::shared_ptr<hold> same, write;
  bool reads = false;
  for (auto& weak : m.holds)
    if (auto h = weak.lock(); h && h->who == who && !h->released) {
      if (h->kind == kind) same = h;
      if (h->kind == node_kind::write) write = h;
      reads = reads || h->kind == node_kind::read;
    }
  if (same) return {same->lost || !session_sure(m) ? reentry::lost : reentry::again, same};
  if (kind == node_kind::write && reads) return {reentry::deadlock};
  if (kind == node_kind::read && write) return {write->lost ? reentry::lost : reentry::downgrade, write};
  return {};
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, lock>> acquire(std::shared_ptr<engine_state> state,
                                                         acquire_request request) {
  if (co_await cancelled_already()) co_return std::make_tuple(std::error_code(asio::error::operation_aborted), lock{});
  auto a = fresh_attempt(*state, request);
  if (request.who) {
    // (Queueing behind its own node would wait for ever.)
    auto again = reentry_of(*state, *request.who, request.kind);
    switch (again.what) {
      case reentry::none: break;
      case reentry::again: co_return std::make_tuple(std::error_code{}, grant_of(again.h));
      case reentry::lost: co_return std::make_tuple(make_error_code(error::lock_lost), lock{});
      case reentry::deadlock: co_return std::make_tuple(make_error_code(error::would_deadlock), lock{});
      case reentry::downgrade: a.downgrade_of = again.h->name; break;
    }
  }
  for (;;) {
    auto result = co_await settle(queue_up(state, request.who, request.try_once, a), request.deadline, [&] {
      std::vector<attempt> attempts;
      attempts.push_back(std::move(a));
      return discard(state, std::move(attempts));
    });
    if (a.downgrade_of || !queue_again(std::get<0>(result), *state, request.try_once, a.generation)) co_return result;
    a = fresh_attempt(*state, request);
  }
}

namespace {

// Until the leases' children are at most `max` (every child takes a slot, as
// Curator counts them) with all of `mine` among them. lock_busy at once if not
// so on the first look with `try_once`.
// The semaphore's mutex as its holder sees it: set the moment the mutex may
// be lost. Then two acquirers may wait for room at once and each count the
// other's nodes: the wait ends (lock_lost) rather than wait for ever. (A
// latch: the loss may come while the wait is listing, not waiting.)
using guard_watch = strand_latch;

awaitable<std::error_code> wait_for_room(std::shared_ptr<engine_state> m, const std::vector<attempt>& mine,
                                         std::size_t max, bool try_once, std::shared_ptr<guard_watch> guard) {
  auto& s = m->s;
  // Cut off, it waits for the connection and lists again (its leases are
  // still there while the session lives).
  for (;;) {
    if (guard->is_set()) co_return make_error_code(error::lock_lost);
    auto [ec, kids] = co_await s.async_get_children(m->path, as_tuple(use_awaitable));
    if (ride_through(ec, s, mine.front())) {
      if (auto connect_ec = co_await until_retry(m, ec)) co_return connect_ec;
      continue;
    }
    if (!ec && s.generation() != mine.front().generation) ec = make_error_code(error::session_expired);
    if (ec) co_return ec;
    std::vector<std::string> names;
    for (auto& a : mine) names.push_back(a.node.name);
    switch (room_for(kids.names, names, max)) {
      case room_verdict::missing: co_return make_error_code(error::lock_lost);  // deleted by someone else
      case room_verdict::granted:
        if (session_sure(*m)) co_return std::error_code{};
        if (auto never = never_sure(*m)) co_return never;
        // The listing too old (session_sure): listed again after a sync
        // (whose error, if any, the listing meets again).
        co_await s.async_sync(m->path, as_tuple(use_awaitable));
        continue;
      case room_verdict::wait: break;
    }
    if (try_once) co_return make_error_code(error::lock_busy);
    auto woken = co_await (s.async_wait_children_changed(m->path, kids.stat.cversion, as_tuple(use_awaitable)) ||
                           guard->async_wait(as_tuple(use_awaitable)));
    if (woken.index() == 1) {
      if (guard->is_set()) co_return make_error_code(error::lock_lost);
      co_return std::error_code(asio::error::operation_aborted);
    }
    if (auto [watch_ec, event] = std::get<0>(woken); watch_ec) {
      if (!ride_through(watch_ec, s, mine.front())) co_return watch_ec;
      if (auto connect_ec = co_await until_retry(m, watch_ec)) co_return connect_ec;
    }
  }
}

// Creates the lease nodes of `mine`, then waits for room for all of them.
awaitable<std::tuple<std::error_code>> take_leases(std::shared_ptr<engine_state> m, std::vector<attempt>& mine,
                                                   std::size_t max, bool try_once,
                                                   std::shared_ptr<guard_watch> guard) {
  for (auto& a : mine) {
    auto [ec, listed] = co_await create_node(m, a);
    if (ride_through(ec, m->s, a) && !a.node.name.empty()) ec = {};  // wait_for_room lists again
    if (!ec && a.generation != mine.front().generation) ec = make_error_code(error::session_expired);
    if (ec) co_return std::make_tuple(ec);
  }
  co_return std::make_tuple(co_await wait_for_room(m, mine, max, try_once, std::move(guard)));
}

// One attempt of acquire_leases; `mutex_lost` tells whether the semaphore's
// mutex may have been lost while it waited for room.
asio::awaitable<std::tuple<std::error_code, std::vector<lock>>> lease_attempt(std::shared_ptr<engine_state> leases,
                                                                            std::shared_ptr<engine_state> locks,
                                                                            lease_request request, bool& mutex_lost) {
  using result_type = std::tuple<std::error_code, std::vector<lock>>;
  auto failed = [](std::error_code ec) { return result_type(ec, std::vector<lock>{}); };
  if (co_await cancelled_already()) co_return failed(asio::error::operation_aborted);
  if (request.count < 1 || request.count > request.max)
    co_return failed(make_error_code(error::invalid_lease_count));
  // One acquirer at a time waits for room (the semaphore's mutex, as
  // Curator's): so n leases are taken all at once, and no two zkasio
  // acquirers of several leases can each hold part of what the other waits
  // for.
  std::vector<attempt> mine;
  for (std::size_t i = 0; i < request.count; ++i)
    mine.push_back({.kind = node_kind::lease, .uuid = make_uuid(), .data = leases->options.data, .node = {}, .stat = {}});
  std::error_code ec;
  lock guard;  // (released in the background when dropped)
  try {
    std::tie(ec, guard) = co_await async_acquire(locks, {.try_once = request.try_once, .deadline = request.deadline},
                                                 as_tuple(use_awaitable));
    if (ec) co_return failed(ec);
    auto watch = std::make_shared<guard_watch>(leases->strand);
    // (Emitted on the locks' strand, which is this one: see semaphore.hpp.)
    guard.lost_slot().assign([watch](asio::cancellation_type) { watch->set(); });
    if (request.deadline)
      std::tie(ec) = co_await until(take_leases(leases, mine, request.max, request.try_once, watch), *request.deadline);
    else
      std::tie(ec) = co_await take_leases(leases, mine, request.max, request.try_once, watch);
    mutex_lost = watch->is_set();
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  if (ec) {
    auto removing = discard(leases, std::move(mine));
    if (ec == error::lock_busy) {
      try {
        ec = co_await busy_after(std::move(removing));
      } catch (const std::system_error&) {
        ec = asio::error::operation_aborted;
      }
    }
    co_return failed(ec);
  }
  std::vector<lock> held;
  for (auto& a : mine) held.push_back(granted(leases, a, std::nullopt));
  co_return result_type(std::error_code{}, std::move(held));
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, std::vector<lock>>> acquire_leases(std::shared_ptr<engine_state> leases,
                                                                             std::shared_ptr<engine_state> locks,
                                                                             lease_request request) {
  for (;;) {
    bool mutex_lost = false;
    auto generation = leases->s.generation();
    auto result = co_await lease_attempt(leases, locks, request, mutex_lost);
    auto ec = std::get<0>(result);
    // The semaphore's mutex may be lost while the acquirer waits for room
    // (its session in trouble, maybe expiring): it held no lease, so with
    // requeue_on_expiry it queues again as well.
    bool mutex_gone = mutex_lost && ec == error::lock_lost && leases->options.requeue_on_expiry && !request.try_once;
    if (!mutex_gone && !queue_again(ec, *leases, request.try_once, generation)) co_return result;
  }
}

asio::awaitable<std::tuple<std::error_code, lock>> acquire_lease(std::shared_ptr<engine_state> leases,
                                                               std::shared_ptr<engine_state> locks,
                                                               lease_request request) {
  auto [ec, held] = co_await acquire_leases(std::move(leases), std::move(locks), request);
  co_return std::make_tuple(ec, held.empty() ? lock{} : std::move(held.front()));
}

// ----------------------------------------------------------------- race

namespace {

// The path's parent and the node's name in it.
std::pair<std::string, std::string> split_path(const std::string& path) {
  auto slash = path.rfind('/');
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Waits for this session's turn at the race node (see local_turns.hpp); from
// then on the attempt holds it: its node, when it has one, is the only one
// of this session on the path. session_expired if the session it queued in
// ended meanwhile.
// With `try_once`, lock_busy at once when it is another's turn.
awaitable<std::error_code> take_turn(std::shared_ptr<engine_state> m, attempt& a, bool try_once) {
  local_turns::line_key key{m->core, a.generation};
  if (try_once) {
    a.turn = m->turns->try_take(key);
    if (m->s.generation() != a.generation) co_return make_error_code(error::session_expired);
    co_return a.turn ? std::error_code{} : make_error_code(error::lock_busy);
  }
  if (auto ec = co_await wait_here(m, [&](completion_ptr<> done) { m->turns->enter(key, m->strand, std::move(done)); }))
    co_return ec;
  a.turn = m->turns->take(key);
  co_return m->s.generation() == a.generation ? std::error_code{} : make_error_code(error::session_expired);
}

// Whether a race contender's create took effect, after it failed with
// `create_ec` (retryable) or was cancelled: the node at the path, after a
// sync, if the attempt's session owns it (with the session's turn, such a
// node is this attempt's); nullopt if not. Asked again while the connection
// fails; session_expired once the attempt's session is over (the node, if
// made, went with it).
awaitable<std::tuple<std::error_code, std::optional<node_stat>>> find_race_node(std::shared_ptr<engine_state> m,
                                                                               const attempt& a,
                                                                               std::error_code create_ec) {
  auto& s = m->s;
  auto failure = [](std::error_code ec) { return std::make_tuple(ec, std::optional<node_stat>()); };
  // `failed`: the last request's error, create_ec at first.
  for (std::error_code failed = create_ec;;) {
    if (auto connect_ec = co_await until_retry(m, failed)) co_return failure(connect_ec);
    if (s.generation() != a.generation) co_return failure(make_error_code(error::session_expired));
    std::tie(failed) = co_await s.async_sync(m->path, as_tuple(use_awaitable));
    if (ride_through(failed, s, a)) continue;
    if (failed && failed != error::no_node) co_return failure(failed);
    std::optional<node_stat> st;
    std::tie(failed, st) = co_await s.async_exists(m->path, as_tuple(use_awaitable));
    if (ride_through(failed, s, a)) continue;
    if (failed) co_return failure(failed);
    if (st && st->ephemeral_owner != a.session_id) st.reset();
    co_return std::make_tuple(std::error_code{}, st);
  }
}

// Seed 003's non-fair way: create the one EPHEMERAL node at the path; if it
// exists, wait for its deletion (a watch every waiter sets: each release
// wakes them all, the herd) and race again. A lost create reply is answered
// by the node's ephemeral owner: with this session's turn, a node of this
// session is this attempt's.
awaitable<std::tuple<std::error_code, lock>> race_for(std::shared_ptr<engine_state> m, std::optional<owner> who,
                                                      bool try_once, attempt& a) {
  auto& s = m->s;
  auto failed = [](std::error_code ec) { return std::make_tuple(ec, lock{}); };
  if (s.state() != session_state::connected)
    if (auto [ec] = co_await s.async_connect(as_tuple(use_awaitable)); ec) co_return failed(ec);
  a.generation = s.generation();
  if (auto ec = co_await take_turn(m, a, try_once)) co_return failed(ec);
  // The id of a.generation's session (if the generation is still
  // a.generation below): read after the generation, which is counted after
  // the old id is cleared, the new id coming with the handshake
  // (session_impl::on_unrecoverable). 0: that session is not made yet.
  while ((a.session_id = s.id()) == 0) {
    if (auto [ec] = co_await s.async_connect(as_tuple(use_awaitable)); ec) co_return failed(ec);
    if (s.generation() != a.generation) co_return failed(make_error_code(error::session_expired));
  }
  bool checked_orphan = false;
  for (int parents_made = 0;;) {
    if (s.generation() != a.generation) co_return failed(make_error_code(error::session_expired));
    a.submitted = true;
    auto [ec, made] = co_await s.async_create(m->path, a.data, create_options(create_mode::ephemeral, node_acl(*m)),
                                              as_tuple(use_awaitable));
    if (!ec && session_sure(*m)) {
      a.stat = made.stat;
      co_return std::make_tuple(std::error_code{}, granted(m, a, who));
    }
    if (ec == error::node_exists && !checked_orphan) {
      // With this session's turn, a node of this session is nobody's: one
      // whose delete failed (a hold's release) is deleted. Once is enough:
      // while the attempt has the turn, this session makes no other.
      checked_orphan = true;
      auto [stat_ec, st] = co_await s.async_exists(m->path, as_tuple(use_awaitable));
      if (ride_through(stat_ec, s, a)) {
        checked_orphan = false;
        if (auto connect_ec = co_await until_retry(m, stat_ec)) co_return failed(connect_ec);
        continue;
      }
      if (stat_ec) co_return failed(stat_ec);
      // A persistent node at the path would be waited for in vain.
      if (st && st->ephemeral_owner == 0) co_return failed(make_error_code(error::node_exists));
      if (st && st->ephemeral_owner == a.session_id) {
        if (auto delete_ec = co_await delete_node(m, "", st->ephemeral_owner, st->czxid); delete_ec && delete_ec != error::lock_lost)
          co_return failed(delete_ec);
        continue;
      }
    }
    if (ec == error::node_exists) {
      if (try_once) co_return failed(make_error_code(error::lock_busy));
      auto [wait_ec] = co_await s.async_wait_deleted(m->path, as_tuple(use_awaitable));
      if (ride_through(wait_ec, s, a)) wait_ec = co_await until_retry(m, wait_ec);
      if (wait_ec) co_return failed(wait_ec);
      continue;
    }
    if (ec == error::no_node && parents_made++ < 3) {
      if (auto parents_ec = co_await make_parents(m, split_path(m->path).first, a)) co_return failed(parents_ec);
      continue;
    }
    if (ec && ec != condition::retryable) co_return failed(ec);
    // The create may have taken effect (its reply lost), or took effect but
    // its reply came too late to be sure of the session (session_sure):
    // looked up, until a look is recent enough.
    for (;;) {
      auto [find_ec, mine] = co_await find_race_node(m, a, std::exchange(ec, {}));
      if (find_ec) co_return failed(find_ec);
      if (!mine) break;  // made again
      if (session_sure(*m)) {
        a.stat = *mine;
        co_return std::make_tuple(std::error_code{}, granted(m, a, who));
      }
      if (auto never = never_sure(*m)) co_return failed(never);
    }
  }
}

// After a failed or cancelled race: deletes the node if this attempt's
// create took effect (this session's node: the attempt has the session's
// turn, which it keeps until then).
awaitable<std::error_code> remove_race_node(std::shared_ptr<engine_state> m, attempt a) {
  auto [ec, mine] = co_await find_race_node(m, a, {});
  if (ec == error::session_expired) co_return std::error_code{};  // it went with its session
  if (ec || !mine) co_return ec;
  co_return co_await delete_node(m, "", mine->ephemeral_owner, a.stat.czxid ? a.stat.czxid : mine->czxid);
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, lock>> race(std::shared_ptr<engine_state> state, acquire_request request) {
  if (co_await cancelled_already()) co_return std::make_tuple(std::error_code(asio::error::operation_aborted), lock{});
  if (request.who)
    if (auto held = reentry_of(*state, *request.who, node_kind::lock); held.what != reentry::none)
      co_return std::make_tuple(held.what == reentry::again ? std::error_code{} : make_error_code(error::lock_lost),
                                held.what == reentry::again ? grant_of(held.h) : lock{});
  request.kind = node_kind::lock;  // (an election's too: one node of no queue's kind)
  auto a = fresh_attempt(*state, request);  // its node: the path itself (name "", engine_state::full)
  for (;;) {
    auto result = co_await settle(race_for(state, request.who, request.try_once, a), request.deadline, [&] {
      // (Without its turn the attempt was granted: the deadline's `||` dropped
      // the lock, whose release deletes the node.)
      std::vector<background<std::error_code>> removing;
      if (a.submitted && a.turn) removing.emplace_back(state->strand, remove_race_node(state, std::move(a)));
      return removing;
    });
    if (!queue_again(std::get<0>(result), *state, request.try_once, a.generation)) co_return result;
    a = fresh_attempt(*state, request);
  }
}

// ----------------------------------------------------------------- leader

namespace {

// Who leads now, and what to watch for a change: the leader's node (a
// candidate's node is never made again once gone), or the children of `dir`
// (no leader yet; or a race node, which the next holder makes again at the
// same path: its parent's cversion tells every incarnation apart).
struct leader_look {
  std::optional<leader> who;
  std::string dir;
  std::optional<std::int32_t> cversion;  // nullopt: `dir` does not exist
  std::int64_t dir_czxid = 0;            // which `dir`: one made again starts its cversion anew
};

// A change of leader is a change of node (a leader's data may change: that
// is not another leader).
bool same_leader(const std::optional<leader>& a, const std::optional<leader>& b) {
  return a.has_value() == b.has_value() && (!a || (a->node == b->node && a->fencing_token == b->fencing_token));
}

awaitable<std::tuple<std::error_code, leader_look>> look_for_leader(std::shared_ptr<engine_state> m) {
  auto& s = m->s;
  bool race = m->family == queue_family::race;
  auto [parent, leaf] = split_path(m->path);
  leader_look look{.who = std::nullopt, .dir = race ? parent : m->path, .cversion = std::nullopt};
  for (;;) {
    auto [ec, kids] = co_await s.async_get_children(look.dir, as_tuple(use_awaitable));
    if (ec == error::no_node) co_return std::make_tuple(std::error_code{}, look);
    if (ec) co_return std::make_tuple(ec, look);
    look.cversion = kids.stat.cversion;
    look.dir_czxid = kids.stat.czxid;
    std::optional<std::string> name;
    if (race) {
      if (std::find(kids.names.begin(), kids.names.end(), leaf) != kids.names.end()) name = "";
    } else if (auto queue = lock_queue(kids.names, m->family); !queue.empty()) {
      name = queue.front().name;
    }
    if (!name) co_return std::make_tuple(std::error_code{}, look);
    auto [read_ec, data] = co_await s.async_get_data(m->full(*name), as_tuple(use_awaitable));
    if (read_ec == error::no_node) continue;  // it went meanwhile: look again
    if (read_ec) co_return std::make_tuple(read_ec, look);
    look.who = leader{m->full(*name), std::move(data.data), data.stat.czxid};
    co_return std::make_tuple(std::error_code{}, look);
  }
}

}  // namespace

asio::awaitable<std::tuple<std::error_code, std::optional<leader>>> current_leader(std::shared_ptr<engine_state> state) {
  auto [ec, look] = co_await look_for_leader(state);
  co_return std::make_tuple(ec, std::move(look.who));
}

asio::awaitable<std::tuple<std::error_code, std::optional<leader>>> leader_change(std::shared_ptr<engine_state> state,
                                                                                  std::optional<leader> last_seen) {
  auto& s = state->s;
  for (;;) {
    auto [ec, look] = co_await look_for_leader(state);
    if (ec || !same_leader(look.who, last_seen)) co_return std::make_tuple(ec, std::move(look.who));
    std::error_code wait_ec;
    if (!look.cversion) {  // no election yet: its path is where one appears
      wait_ec = co_await create_parents(*state, look.dir);
    } else if (look.who && state->family != queue_family::race) {
      std::tie(wait_ec) = co_await s.async_wait_deleted(look.who->node, as_tuple(use_awaitable));
    } else {
      auto changed = co_await (s.async_wait_children_changed(look.dir, *look.cversion, as_tuple(use_awaitable)) ||
                               other_incarnation(s, look.dir, look.dir_czxid));
      if (changed.index() == 0) {
        auto [watch_ec, event] = std::get<0>(changed);
        wait_ec = watch_ec == error::no_node ? std::error_code{} : watch_ec;
      }
    }
    if (wait_ec) co_return std::make_tuple(wait_ec, std::optional<leader>{});
  }
}

asio::awaitable<std::tuple<std::error_code, std::vector<contender>>> contenders(std::shared_ptr<engine_state> state) {
  auto& s = state->s;
  auto [ec, kids] = co_await s.async_get_children(state->path, as_tuple(use_awaitable));
  std::vector<contender> queue;
  if (ec) co_return std::make_tuple(ec == error::no_node ? std::error_code{} : ec, std::move(queue));
  for (auto& node : lock_queue(kids.names, state->family)) {
    auto [read_ec, data] = co_await s.async_get_data(state->full(node.name), as_tuple(use_awaitable));
    if (read_ec == error::no_node) continue;  // it went while we read
    if (read_ec) co_return std::make_tuple(read_ec, std::vector<contender>{});
    queue.push_back({node.name, static_cast<std::int32_t>(node.sequence), std::move(data.data),
                     node.kind == node_kind::read});
  }
  co_return std::make_tuple(std::error_code{}, std::move(queue));
}

asio::awaitable<std::tuple<std::error_code>> revoke(std::shared_ptr<engine_state> state, std::string node) {
  if (auto parsed = parse_lock_node(node); !parsed || !in_family(parsed->kind, state->family))
    co_return std::make_tuple(make_error_code(error::not_held));
  auto [ec, st] = co_await state->s.async_set_data(state->full(node), revoke_message,
                                                    as_tuple(use_awaitable));
  if (ec == error::no_node) ec = make_error_code(error::not_held);
  co_return std::make_tuple(ec);
}

}  // namespace detail
}  // namespace zkasio
