// zkasio::lock: what every lock recipe's acquire gives (a mutex's lock, a
// shared_mutex's read or write lock): a held node with a fencing token, a lost
// signal, a release that is guaranteed, and writes guarded by the node.
// with_hold runs a critical section under one. The recipes' options and
// their policy for a lock that may be lost are here too.
#pragma once

#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/prefer.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <zkasio/detail/completion.hpp>
#include <zkasio/error.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/operations.hpp>
#include <zkasio/session.hpp>

namespace zkasio {

// Who holds a lock, for reentrancy: copy it to every place that acts as the
// same holder.
class owner {
 public:
  owner();  // a new identity
  friend bool operator==(const owner&, const owner&) = default;
  std::uint64_t id() const noexcept { return id_; }

 private:
  std::uint64_t id_;
};

// What an exclusive or shared acquire may be given besides its token, in one
// argument (so that no option can be taken for the token, and any may be
// combined): `m.async_acquire({.who = me, .timeout = 2s})`.
// - who: reentrancy by this owner (a hold of its of the same kind on this
//   lock object is granted again at once, whatever the deadline; a
//   shared_mutex's write holder asking for the read lock makes a read node, a
//   downgrade, which the deadline can end, the write lock still held);
// - deadline, timeout: when to give up (lock_timeout if connected then,
//   not_connected if not); the timeout counts from the launch (a timeout too
//   long to add is none); with both, the earlier.
// Without any, the acquire is its own owner and waits for as long as it takes.
struct acquire_options {
  std::optional<owner> who = std::nullopt;
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt;
  std::optional<std::chrono::steady_clock::duration> timeout = std::nullopt;
};

// When a holder is told (by its lock's lost signal) that the lock may be
// lost while the session is disconnected. Under both, the signal fires at the
// latest at last contact + negotiated timeout - safety margin (see
// session::last_contact), connected or not: a follower cut off from its
// leader goes on answering for a while, and the leader may not have seen
// what it answered. No server expires the session before last contact +
// negotiated timeout: the leader's tracker puts a session touched at t in
// the tick bucket after t + timeout, and last contact is a time the leader
// is known to have touched it (docs/guarantees.md).
enum class lost_policy {
  on_suspend,     // at once (as Curator's docs advise)
  before_expiry,  // at the last moment the server could not yet have expired the
                  // session: last contact + negotiated timeout - safety margin
  // Only once the session is over (expired, closed) or the node deleted or
  // revoked: never while the session may live, however long a
  // disconnection. For a node whose life is its session's (presence,
  // membership) held with async_hold_node; never for a lock, which would be
  // held past the moment it may be lost: the lock recipes refuse it with
  // invalid_policy.
  on_expiry,
};

// zkasio::mutex's in-process handoff (mutex_options::local_handoff): how long
// this process may go on handing the lock from one of its contenders to the
// next in memory once another contender's node is queued behind its node.
// Until this process sees such a node (a children watch on the lock path,
// set when its node is granted) the run is unbounded; from then on, at most
// `max_run` more local handoffs, and none `max_time` after it was seen; then
// the node is deleted and the other contender goes next.
struct local_handoff_bound {
  std::size_t max_run = 16;
  std::chrono::milliseconds max_time{50};
};

// What a lock object tells its observer (lock_options::observer), on its
// strand, as it happens: for metrics (wait and hold times), not for
// control. Per acquire: acquiring, then granted or failed; per grant (each
// lock, a reentrant one's too): lost when its lost signal fires, released
// when it is given back (released, or its lock object destroyed).
struct lock_event {
  enum class kind { acquiring, granted, failed, lost, released };
  kind what = kind::acquiring;
  // The lock object's path; a semaphore's: its leases', "<path>/leases" (one
  // acquiring per acquire, then failed, or granted for each lease it gives;
  // its mutex, taken inside, is not heard).
  std::string_view path;
  std::string_view node;  // granted, lost, released: the node's full path
  // granted, failed: since acquiring; lost, released: since granted.
  std::chrono::steady_clock::duration took{};
  error_code error;  // failed: why (operation_aborted for a cancellation)
};

// lock_options' local_handoff: a zkasio::mutex's alone. An empty type that
// only `{}` makes (no bound converts to it), so that giving another recipe a
// bound does not compile.
struct no_local_handoff {};

// Options of a lock recipe: lock_options for every recipe, mutex_options
// (the same, with local_handoff) for zkasio::mutex. Both are aggregates, for
// designated initializers: `mutex m(s, path, {.data = "me"})`.
template <class LocalHandoff>
struct basic_lock_options {
  lost_policy policy = lost_policy::before_expiry;
  // How long before the earliest possible expiry (session::last_contact +
  // negotiated timeout: no server expires the session sooner,
  // docs/guarantees.md has the arithmetic) to fire: this process's own delay
  // in acting on the signal, and the clocks' drift. last_contact() already
  // counts only what the leader is known to have seen through a follower
  // (session_options::server_tick_time). Below the timeout less a tick, or
  // no grant is ever sure (invalid_safety_margin).
  std::chrono::milliseconds safety_margin{200};
  // Written into the lock node, shown by contenders (e.g. "host:pid").
  std::string data = {};
  // An acquire whose session expires while it waits fails with
  // session_expired (false), or queues again in the session that follows
  // (session_options::reconnect_on_expiry), as the last in line, within its
  // own deadline (true). A waiter loses nothing with its session but its
  // place in the queue. (A semaphore's acquirer queues again for its mutex.)
  bool requeue_on_expiry = false;
  // The ACL of every node an acquire creates: its own, and the lock path and
  // its parents when they are missing. By default (nullopt), with a session
  // that authenticated (session::authenticated()),
  // creator_all_world_read_acl(): only sessions with the creator's identity
  // may delete, change or revoke the nodes, or queue under the lock path;
  // everyone may read them (and see the queue). Without authentication,
  // open_acl_unsafe(). ZooKeeper checks a delete against the parent's ACL:
  // a holder's node is safe from deletion by others under a lock path made
  // with such an ACL, by an acquire or by you (see the README).
  std::optional<acl> node_acl = std::nullopt;
  // mutex_options only: the lock object keeps its node while its own contenders wait and hands the lock
  // from one to the next in memory, with no ZooKeeper write, within the bound
  // (see local_handoff_bound and the README). Its contenders wait in this
  // process behind the one whose node is in the queue; each grant is a lock
  // of its own: its lost signal, its fencing token (lock::fencing_token), reentrancy by owner.
  [[no_unique_address]] LocalHandoff local_handoff = {};
  // Called with each lock_event of this lock object, on its strand: keep it
  // short (it runs on the lock's path). An exception it throws is dropped.
  std::function<void(const lock_event&)> observer = {};

  // Any recipe's options are a mutex's, without local handoff. (A field
  // added above must be added here: the binding counts them.)
  operator basic_lock_options<std::optional<local_handoff_bound>>() const
    requires std::is_same_v<LocalHandoff, no_local_handoff>
  {
    const auto& [policy_, safety_margin_, data_, requeue_, node_acl_, no_handoff_, observer_] = *this;
    return {policy_, safety_margin_, data_, requeue_, node_acl_, std::nullopt, observer_};
  }
};
using lock_options = basic_lock_options<no_local_handoff>;
using mutex_options = basic_lock_options<std::optional<local_handoff_bound>>;

struct contender {
  std::string node;  // the node's full path (as lock::node() and leader::node)
  std::int64_t sequence = 0;  // as the server wrote it: negative once its counter passed 2^31
  std::string data;  // what the contender wrote into its node
  bool shared = false;  // a reader of a shared_mutex
};

// A grant's fencing token: the czxid of its lock node (which survives
// re-creation of the parent), and the number of in-process handoffs on that
// node before the grant (always 0 without mutex_options::local_handoff).
// Compared as a pair: an exclusive grant's token is greater than every
// earlier grant's; a shared grant's (a shared_mutex's read lock) greater
// than every earlier exclusive grant's; shared grants among themselves are
// not ordered. Reentrant grants share their holder's. Pass both to what the
// lock protects (czxid alone where local handoff is off).
struct fence_token {
  std::int64_t czxid = 0;
  std::uint64_t local = 0;
  friend auto operator<=>(const fence_token&, const fence_token&) = default;
};

// Who holds a recipe's one place (an election's leader, a race_mutex's
// holder), as an observer sees it.
struct leader {
  std::string node;  // the leader's node (full path)
  std::string data;  // what the leader wrote into it (election: its campaign's data)
  fence_token fencing_token;  // its node's: a new leader, a greater token
  friend bool operator==(const leader&, const leader&) = default;
};

namespace detail {
struct engine_state;
struct grant;
// The starts of a lock's operations (src/recipes/engine/lock.cpp), on the
// lock object `engine` (a released grant, or none: not_held). Each is called
// where its operation is launched and moves to the engine's strand itself,
// as every start of the engine does (lock_engine.hpp).
void start_wait_lost(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g, completion_ptr<> done);
void start_release(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g, completion_ptr<> done);
void start_leave(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g, completion_ptr<> done);
// Whether `engine` holds a node of the user's own recipe (async_hold_node).
bool holds_own_node(const std::shared_ptr<engine_state>& engine);
void start_guarded_multi(const std::shared_ptr<engine_state>& engine, std::shared_ptr<grant> g,
                         std::vector<multi_op> ops, completion_ptr<std::vector<op_result>> done);
// A strand, type-erased: over an io_context's own executor when the session
// runs on one (see make_strand_over in detail/session_core.hpp).
using lock_strand = asio::any_io_executor;

// Completes `handler` at once with `values`, posted to its associated
// executor (`fallback` when it has none), which is kept busy until then.
template <class Handler, class Executor, class... Values>
void complete_now(Handler handler, const Executor& fallback, Values... values) {
  auto executor = asio::prefer(asio::get_associated_executor(handler, fallback),
                               asio::execution::outstanding_work.tracked);
  asio::post(executor, [handler = std::move(handler), values = std::make_tuple(std::move(values)...)]() mutable {
    std::apply(std::move(handler), std::move(values));
  });
}

}  // namespace detail

// A held lock: move-only; releases in the background when destroyed.
// Every grant (reentrant ones too) is a lock object of its own, with its own
// lost signal; they share one node.
// Its operations (async_wait_lost, async_release, async_guarded_multi) take
// any completion token and complete on the handler's associated executor
// (by default the lock's strand, get_executor(); for a lock that never
// held, the system executor). Each looks at the lock when it starts, on
// the thread that launches it: until then the lock object must live and
// not be moved or used from another thread. An operation never launched
// does nothing (a release awaited in a coroutine already cancelled is
// refused by Asio before it starts: the lock stays held until released or
// destroyed).
class [[nodiscard("a lock discarded is released at once")]] lock {
 public:
  lock() = default;  // holds nothing: async_release completes with not_held
  // A grant of a hold on the lock object `engine` (what the engine makes).
  lock(std::shared_ptr<detail::grant> grant, std::shared_ptr<detail::engine_state> engine) noexcept
      : grant_(std::move(grant)), engine_(std::move(engine)) {}
  lock(lock&&) noexcept = default;
  lock& operator=(lock&& other) noexcept;
  lock(const lock&) = delete;
  lock& operator=(const lock&) = delete;
  ~lock();

  // Observers, safe from any thread.
  bool held() const noexcept;
  explicit operator bool() const noexcept { return held(); }
  // The lock node's path.
  const std::string& node() const;
  // Its fencing token (see fence_token). Reentrant grants share their
  // node's; a downgraded read lock, taken by a write holder, has its write
  // lock's (its own node is newer than those of writers queued behind the
  // write lock, which are granted after it). {0, 0} for an empty lock.
  fence_token fencing_token() const;
  // True once the lock may be lost (see lost_slot).
  bool lost() const noexcept;

  // Completes (without error, as a timer's wait does) the moment the lock
  // may be lost (session expired, disconnected under the policy, the node
  // deleted by someone else, or a revocation requested), at once if it may
  // be lost already: no loss can be missed. Completes with not_held at once
  // for a lock released or never held, and when this lock is released
  // meanwhile. Cancellation (terminal, partial, total) completes it with
  // operation_aborted and does nothing else. With Asio's awaitable
  // operators, `co_await (work() || held.async_wait_lost())` stops work() at
  // its next wait the moment the lock may be lost (the result's index is 1).
  // Const: it only watches (a critical section given `const lock&` may wait).
  // void(error_code)
  template <class Token = default_token>
  auto async_wait_lost(Token&& token = {}) const {
    return asio::async_initiate<Token, void(error_code)>(
        [](auto handler, const lock* self) {
          self->launch(std::move(handler), detail::read_cancellation, &detail::start_wait_lost, self->grant_);
        },
        token, this);
  }

  // The low-level form: emitted (terminal) the moment the lock may be lost,
  // on the lock object's strand (get_executor()). Called after the loss, it
  // gives a slot of its own that is emitted just after (posted to the
  // strand): bind it at once, on the strand, and the bound operation is
  // cancelled as if the loss came after. A slot kept from before the loss
  // and bound after it is never emitted: take the slot where you bind it.
  // Before the loss it is one slot per lock object, and like any Asio slot
  // it holds one handler: binding a second operation to it replaces the
  // first's (which is then not cancelled by the loss). To stop several
  // operations at once, use async_wait_lost (any number of waits) or a
  // signal of your own that one handler on this slot emits.
  asio::cancellation_slot lost_slot();
  asio::any_io_executor get_executor() const;  // a strand

  // Releases: completes with lock_lost if the lock had been lost (its node
  // was gone, or it had been revoked or may have been lost under the policy),
  // not_held if this lock was released already or never held. A delete hit
  // by a connection loss goes on while the session lives, also after a
  // cancellation of the wait (terminal or partial: operation_aborted at once)
  // and after the lock may be lost meanwhile (the policy's deadline, the
  // session's end: lock_lost at once); a retried delete that finds the node
  // gone counts as released (the first one took effect). The grant is taken when the operation starts, not
  // when it is made: a deferred release (asio::experimental::deferred)
  // releases when it is launched, and this lock must live until then.
  template <class Token = default_token>
  auto async_release(Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [](auto handler, lock* self) {
          self->launch(std::move(handler), detail::write_cancellation, &detail::start_release,
                       std::exchange(self->grant_, {}));
        },
        token, this);
  }

  // Lets go of a node held with async_hold_node without deleting it: the
  // node stays the session's, until the session ends or someone deletes it
  // (a presence node whose life is its session's), and this lock holds
  // nothing from then on (its lost signal no longer fires). Completes with
  // not_held if this lock was released already or never held, not_own_node
  // for a lock recipe's lock, which keeps it (its node left would block the
  // queue until its session ended: release it). void(error_code)
  template <class Token = default_token>
  auto async_leave(Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [](auto handler, lock* self) {
          auto g = detail::holds_own_node(self->engine_) ? std::exchange(self->grant_, {}) : self->grant_;
          self->launch(std::move(handler), detail::write_cancellation, &detail::start_leave, std::move(g));
        },
        token, this);
  }

  // A multi that first checks that the lock node still exists: the writes
  // happen only while the lock is held. void(error_code, vector<op_result>)
  // (the results include the check's, first).
  template <class Token = default_token>
  auto async_guarded_multi(std::vector<multi_op> ops, Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code, std::vector<op_result>)>(
        [](auto handler, const lock* self, std::vector<multi_op> ops) {
          self->launch<std::vector<op_result>>(std::move(handler), detail::write_cancellation,
                                               &detail::start_guarded_multi, self->grant_, std::move(ops));
        },
        token, this, std::move(ops));
  }

 private:
  // Starts an operation: `start(engine, args..., done)`; for a lock that
  // never held, not_held at once (on the handler's executor, else the
  // system executor: there is no strand).
  template <class... Values, class Handler, class Start, class... Args>
  void launch(Handler handler, asio::cancellation_type honoured, Start start, Args... args) const {
    if (!engine_)
      return detail::complete_now(std::move(handler), asio::system_executor(), error_code(error::not_held),
                                  Values{}...);
    auto strand = get_executor();
    start(engine_, std::move(args)..., detail::make_completion<Values...>(std::move(handler), strand, strand, honoured));
  }

  std::shared_ptr<detail::grant> grant_;            // empty once released
  std::shared_ptr<detail::engine_state> engine_;    // kept: its strand runs release
};

namespace detail {
// A critical section's body is called as body(held) when it takes the lock
// (const lock&: to read its fencing token), else as body().
template <class Body>
decltype(auto) call_body(Body& body, const lock& held) {
  if constexpr (std::is_invocable_v<Body&, const lock&>) return body(held);
  else return body();
}
template <class Body>
using body_awaitable_t = decltype(call_body(std::declval<Body&>(), std::declval<const lock&>()));
// The executor type of a body's awaitable: the with_* helper's own, and so
// its caller's (asio::any_io_executor, a strand, ...).
template <class Body>
using body_executor_t = typename body_awaitable_t<Body>::executor_type;

// Where with_hold runs the body: the caller's executor, made a strand when
// its type cannot tell whether it is one (an any_io_executor may be a pool
// run by several threads, and the loss is emitted there, which must not
// race the body). Over a caller's strand, the body still runs on it.
template <class Executor>
Executor serialized(const Executor& caller) {
  if constexpr (std::is_same_v<Executor, asio::any_io_executor>) return asio::make_strand(caller);
  else return caller;
}

// The critical section, unless the lock is lost already: with_hold binds its
// stop first, so a loss after this check reaches the body's next wait.
template <class Result, class Executor, class Body>
asio::awaitable<Result, Executor> run_body(const lock& held, Body& body) {
  if (held.lost()) throw system_error(make_error_code(error::lock_lost), "with_lock " + held.node());
  co_return co_await call_body(body, held);
}
}  // namespace detail

// Acquires with `acquire` (an awaitable of a lock), runs the critical section
// `body()` or `body(const lock&)` (returning an asio::awaitable of any
// executor type; the lock gives the fencing token) on the caller's executor,
// cancelled (terminal) the moment the lock may be lost or the caller is
// cancelled, then releases. The body never starts if the lock was lost
// before it could, and is aborted at its next wait the moment the lock may
// be lost. Throws what the acquire throws; lock_lost (system_error) if the
// lock was lost before or during the body (also when the body completed
// meanwhile), at once when the body ends, the node's delete going on in the
// background (it may wait for the connection); otherwise what the body
// throws.
// The loss reaches the body as a handler posted to its executor (an
// asio::any_io_executor caller's is a strand made over it; a caller of
// another executor type must be on a strand or a one-threaded io_context).
// A caller cancelled during the body still has the lock released before
// with_hold ends. A body that turns throw_if_cancelled off must look at its
// cancellation_state after a wait that cannot be cancelled (a post, a
// spawned child): a loss during that wait is only recorded there.
template <class Body>
auto with_hold(asio::awaitable<lock, detail::body_executor_t<Body>> acquire, Body body)
    -> detail::body_awaitable_t<Body> {
  using result_type = typename detail::body_awaitable_t<Body>::value_type;
  using executor_type = detail::body_executor_t<Body>;
  auto held = co_await std::move(acquire);
  std::exception_ptr failure;
  std::optional<std::conditional_t<std::is_void_v<result_type>, bool, result_type>> result;
  try {
    auto body_executor = detail::serialized(co_await asio::this_coro::executor);
    // The body's cancellation: the caller's, and the lock's loss, both
    // emitted on the body's executor. A loss before the body is bound to
    // it is seen by run_body's check.
    auto stop = std::make_shared<asio::cancellation_signal>();
    held.async_wait_lost(asio::bind_executor(body_executor, [stop](error_code ec) {
      if (!ec) stop->emit(asio::cancellation_type::terminal);
    }));
    asio::cancellation_state own = co_await asio::this_coro::cancellation_state;
    if (auto slot = own.slot(); slot.is_connected())
      slot.assign([stop, body_executor](asio::cancellation_type) {
        asio::dispatch(body_executor, [stop] { stop->emit(asio::cancellation_type::terminal); });
      });
    auto run = asio::co_spawn(body_executor, detail::run_body<result_type, executor_type>(held, body),
                              asio::bind_cancellation_slot(stop->slot(), asio::use_awaitable_t<executor_type>{}));
    if constexpr (std::is_void_v<result_type>) {
      co_await std::move(run);
      result.emplace(true);
    } else {
      result.emplace(co_await std::move(run));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // Lost before or during the body: said so at once, whatever else
  // happened (a caller's cancellation too). Otherwise the release, awaited:
  // it starts though the caller may be cancelled (Asio would refuse the
  // co_await), and the caller's setting is put back after. It is not bound
  // to the caller's cancellation: a second cancellation would end its wait
  // before the reply that may say the lock was lost. It says lock_lost at
  // once if the lock may be lost while its delete waits.
  bool lost = held.lost();
  auto where = "with_lock " + held.node();  // (the release empties `held`)
  if (lost) {
    // Ended because the lock may be lost (or lost as it ended): said at
    // once. Its node goes in the background (the lock's end releases it),
    // once the session lets it: a release would wait for the connection.
    held = lock{};
    throw system_error(make_error_code(error::lock_lost), where);
  }
  error_code released;
  bool throws_if_cancelled = co_await asio::this_coro::throw_if_cancelled();
  co_await asio::this_coro::throw_if_cancelled(false);
  co_await held.async_release(asio::bind_cancellation_slot(
      asio::cancellation_slot(), asio::redirect_error(asio::use_awaitable_t<executor_type>{}, released)));
  co_await asio::this_coro::throw_if_cancelled(throws_if_cancelled);
  if (released == error::lock_lost) throw system_error(make_error_code(error::lock_lost), where);
  if (failure) std::rethrow_exception(failure);
  if (released) throw system_error(released, where);
  if constexpr (!std::is_void_v<result_type>) co_return std::move(*result);
}

}  // namespace zkasio
