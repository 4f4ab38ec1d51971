// zkasio::mutex: the fair distributed lock of ZooKeeper's recipe, with nodes
// named as Apache Curator's InterProcessMutex names them, so that Curator and
// zkasio contenders on one path exclude each other.
//
// Each acquire creates one EPHEMERAL_SEQUENTIAL node "_c_<uuid>-lock-<seq>"
// under the lock path (parents are created as containers) and lists the
// children in the same round trip; the lowest sequence holds the lock; every
// other contender waits for the deletion of its immediate predecessor only, so
// a release wakes exactly one waiter.
//
// Cancellation: async_acquire honours terminal and partial cancellation at
// every stage (before the create's reply, while waiting, at the grant): it
// completes with operation_aborted and the node is deleted in the background
// (found by its uuid if the create's reply was not in yet). A lock granted as
// the cancellation arrived is delivered and released by its destructor.
//
// Reentrancy is by owner, not by thread (a coroutine hops threads): an
// acquire passing an `owner` that already holds this mutex object completes
// at once without a new node; the node goes when as many releases as grants
// have happened. Without an owner every acquire is its own owner.
#pragma once

#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/prefer.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>
#include <zkasio/error.hpp>
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

// When a holder is told (by its lock's lost signal) that the lock may be
// lost while the session is disconnected. Under both, the signal fires at the
// latest at last contact + negotiated timeout - safety margin (see
// session::last_contact), connected or not: a follower cut off from its
// leader goes on answering for a while.
enum class lost_policy {
  on_suspend,     // at once (as Curator's docs advise)
  before_expiry,  // at the last moment the server could not yet have expired the
                  // session: last contact + negotiated timeout - safety margin
};

struct mutex_options {
  lost_policy policy = lost_policy::before_expiry;
  // How long before the earliest possible expiry to fire. On an ensemble,
  // make it at least the servers' tickTime / 2 (the leader's sight of a
  // session held through a follower may lag by that).
  std::chrono::milliseconds safety_margin{200};
  // Written into the lock node, shown by contenders (e.g. "host:pid").
  std::string data = {};
};

struct contender {
  std::string node;  // the node's name under the lock path
  std::int64_t sequence = 0;  // as the server wrote it: negative once its counter passed 2^31
  std::string data;  // what the contender wrote into its node
};

namespace detail {
struct mutex_state;
struct grant;
// A strand, type-erased: over an io_context's own executor when the session
// runs on one (see make_lock_strand in mutex.cpp).
using lock_strand = asio::any_io_executor;

template <class Result>
struct signature_of;
template <class... Values>
struct signature_of<std::tuple<std::error_code, Values...>> {
  using type = void(std::error_code, Values...);
};

// Completes at once (through the handler's executor) with `result`.
template <class Result, class Token>
auto complete_with(Result result, Token&& token) {
  return asio::async_initiate<Token, typename signature_of<Result>::type>(
      [](auto handler, Result result) {
        auto executor = asio::prefer(asio::get_associated_executor(handler),
                                     asio::execution::outstanding_work.tracked);
        asio::post(executor, [handler = std::move(handler), result = std::move(result)]() mutable {
          std::apply(std::move(handler), std::move(result));
        });
      },
      token, std::move(result));
}

// Runs `work` (a coroutine that reports errors in its result, never by
// throwing) on `strand` as an asynchronous operation: terminal and partial
// cancellation of the handler's slot reach the coroutine as terminal (what
// these operations leave behind they clean up, or finish, in the
// background; total is not honoured: they all have effects), and the result
// goes to the handler's executor.
template <class Result, class Token>
auto spawn_on(lock_strand strand, asio::awaitable<Result> work, Token&& token) {
  return asio::async_initiate<Token, typename signature_of<Result>::type>(
      [](auto handler, lock_strand strand, asio::awaitable<Result> work) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        // The caller's cancellation is carried to the strand and emitted there:
        // Asio 1.22's co_spawn would run it on the caller's thread, against
        // the coroutine running on the strand.
        auto cancel = std::make_shared<asio::cancellation_signal>();
        if (slot.is_connected())
          slot.assign([cancel, strand](asio::cancellation_type type) {
            constexpr auto honoured = asio::cancellation_type::terminal | asio::cancellation_type::partial;
            if ((type & honoured) == asio::cancellation_type::none) return;
            asio::dispatch(strand, [cancel] { cancel->emit(asio::cancellation_type::terminal); });
          });
        // Keeps the handler's executor busy until the handler has run.
        auto executor = asio::prefer(asio::get_associated_executor(handler, strand),
                                     asio::execution::outstanding_work.tracked);
        auto cancel_slot = cancel->slot();
        asio::co_spawn(
            strand, std::move(work),
            asio::bind_cancellation_slot(
                cancel_slot, [handler = std::move(handler), executor = std::move(executor),
                              cancel = std::move(cancel)](std::exception_ptr e, Result result) mutable {
                  if (e) std::get<0>(result) = make_error_code(error::system_error);
                  asio::dispatch(executor, [handler = std::move(handler),
                                            result = std::move(result)]() mutable {
                    asio::get_associated_cancellation_slot(handler).clear();
                    std::apply(std::move(handler), std::move(result));
                  });
                }));
      },
      token, std::move(strand), std::move(work));
}
}  // namespace detail

// A held lock: move-only; releases in the background when destroyed.
// Every grant (reentrant ones too) is a lock object of its own, with its own
// lost signal; they share one node.
class lock {
 public:
  lock() = default;  // holds nothing: async_release completes with not_held
  explicit lock(std::shared_ptr<detail::grant> grant);
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
  // The czxid of the lock node: increases with every grant of this lock, and
  // survives re-creation of the parent. Pass it to what the lock protects.
  std::int64_t fencing_token() const;
  // True once the lock may be lost (see lost_slot).
  bool lost() const noexcept;

  // Emitted (terminal) the moment the lock may be lost: session expired,
  // disconnected under the policy, the node deleted by someone else, or a
  // revocation requested. Emitted on the mutex's strand (get_executor()),
  // once: bind it only to operations running there, and check lost() after
  // binding (a loss before the binding is not emitted again). with_lock does
  // both.
  asio::cancellation_slot lost_slot();
  asio::any_io_executor get_executor() const;  // a strand

  // Releases: completes with lock_lost if the lock had been lost (its node
  // was gone, or it had been revoked or may have been lost under the policy),
  // not_held if this lock was released already or never held. A delete hit
  // by a connection loss goes on while the session lives, also after a
  // cancellation of the wait (terminal or partial: operation_aborted at once);
  // a retried delete that finds the node gone counts as released (the first
  // one took effect).
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_release(Token&& token = {}) {
    if (!mutex_) return detail::complete_with(std::make_tuple(make_error_code(error::not_held)), std::forward<Token>(token));
    auto strand = get_executor();
    return detail::spawn_on<std::tuple<std::error_code>>(
        std::move(strand), release_coroutine(std::exchange(grant_, {})), std::forward<Token>(token));
  }

  // A multi that first checks that the lock node still exists: the writes
  // happen only while the lock is held. void(error_code, vector<op_result>)
  // (the results include the check's, first).
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_guarded_multi(std::vector<multi_op> ops, Token&& token = {}) {
    if (!mutex_)
      return detail::complete_with(std::make_tuple(make_error_code(error::not_held), std::vector<op_result>{}),
                                   std::forward<Token>(token));
    return detail::spawn_on<std::tuple<std::error_code, std::vector<op_result>>>(
        get_executor(), guarded_multi_coroutine(grant_, std::move(ops)), std::forward<Token>(token));
  }

 private:
  static asio::awaitable<std::tuple<std::error_code>> release_coroutine(
      std::shared_ptr<detail::grant> grant);
  static asio::awaitable<std::tuple<std::error_code, std::vector<op_result>>>
  guarded_multi_coroutine(std::shared_ptr<detail::grant> grant, std::vector<multi_op> ops);

  std::shared_ptr<detail::grant> grant_;            // empty once released
  std::shared_ptr<detail::mutex_state> mutex_;      // kept: its strand runs release
};

class mutex {
 public:
  using executor_type = asio::any_io_executor;  // a strand

  // The session must outlive the mutex and every lock of it, and must not be
  // assigned another session meanwhile.
  mutex(session& s, std::string_view path, mutex_options options = {});
  mutex(mutex&&) noexcept = default;
  mutex& operator=(mutex&&) noexcept = default;
  ~mutex();

  executor_type get_executor() const;
  const std::string& path() const;

  // Waits for the lock. void(error_code, lock)
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_acquire(Token&& token = {}) {
    return acquire(std::nullopt, mode::wait, std::nullopt, std::forward<Token>(token));
  }
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_acquire(const owner& who, Token&& token = {}) {
    return acquire(who, mode::wait, std::nullopt, std::forward<Token>(token));
  }
  // Takes the lock only if nobody holds it or waits before us: fails with
  // lock_busy otherwise, leaving no node behind.
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_try_acquire(Token&& token = {}) {
    return acquire(std::nullopt, mode::try_once, std::nullopt, std::forward<Token>(token));
  }
  // Waits until `deadline` at most (connecting included): then lock_timeout,
  // and the node is deleted.
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_acquire_until(std::chrono::steady_clock::time_point deadline, Token&& token = {}) {
    return acquire(std::nullopt, mode::wait, deadline, std::forward<Token>(token));
  }
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_acquire_for(std::chrono::steady_clock::duration timeout, Token&& token = {}) {
    return async_acquire_until(std::chrono::steady_clock::now() + timeout,
                               std::forward<Token>(token));
  }

  // The queue, in order: who holds (first) and who waits.
  // void(error_code, vector<contender>)
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_contenders(Token&& token = {}) {
    return detail::spawn_on<std::tuple<std::error_code, std::vector<contender>>>(
        get_executor(), contenders_coroutine(state_), std::forward<Token>(token));
  }

  // Asks the holder of `node` (a contender's node name) to release, with
  // Curator's protocol ("__REVOKE__" written into the node): its lost signal
  // fires. not_held when there is no such contender. void(error_code)
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_revoke(std::string_view node, Token&& token = {}) {
    return detail::spawn_on<std::tuple<std::error_code>>(
        get_executor(), revoke_coroutine(state_, std::string(node)), std::forward<Token>(token));
  }

 private:
  enum class mode { wait, try_once };
  template <class Token>
  auto acquire(std::optional<owner> who, mode m,
               std::optional<std::chrono::steady_clock::time_point> deadline, Token&& token) {
    return detail::spawn_on<std::tuple<std::error_code, lock>>(
        get_executor(), acquire_coroutine(state_, who, m == mode::try_once, deadline),
        std::forward<Token>(token));
  }
  static asio::awaitable<std::tuple<std::error_code, lock>> acquire_coroutine(
      std::shared_ptr<detail::mutex_state> state, std::optional<owner> who, bool try_once,
      std::optional<std::chrono::steady_clock::time_point> deadline);
  static asio::awaitable<std::tuple<std::error_code, std::vector<contender>>> contenders_coroutine(
      std::shared_ptr<detail::mutex_state> state);
  static asio::awaitable<std::tuple<std::error_code>> revoke_coroutine(
      std::shared_ptr<detail::mutex_state> state, std::string node);

  std::shared_ptr<detail::mutex_state> state_;
};

namespace detail {
// Runs `body()` on the lock's strand, cancelled (terminal) by the lock's lost
// signal or by the caller's cancellation, unless the lock is lost already. On
// the strand, where the lost signal is emitted, so the check and the binding
// cannot miss it; a loss after the binding aborts the body's next wait.
template <class Result, class Body>
asio::awaitable<Result> run_under(lock& held, Body& body) {
  if (held.lost()) throw std::system_error(make_error_code(error::lock_lost), "with_lock");
  auto stop = std::make_shared<asio::cancellation_signal>();
  held.lost_slot().assign([stop](asio::cancellation_type) { stop->emit(asio::cancellation_type::terminal); });
  // The caller's cancellation arrives on the caller's thread (Asio 1.22's
  // co_spawn): carried to the strand.
  asio::cancellation_state own = co_await asio::this_coro::cancellation_state;
  if (auto slot = own.slot(); slot.is_connected())
    slot.assign([stop, strand = held.get_executor()](asio::cancellation_type) {
      asio::dispatch(strand, [stop] { stop->emit(asio::cancellation_type::terminal); });
    });
  auto stop_slot = stop->slot();
  co_return co_await asio::co_spawn(held.get_executor(), body(), asio::bind_cancellation_slot(stop_slot, asio::use_awaitable));
}
}  // namespace detail

// Acquires `m`, runs the critical section `body()` (returning an
// asio::awaitable) on the lock's strand with the lock's lost signal as its
// cancellation slot, then releases. The body never starts if the lock was
// lost before it could, and is aborted at its next wait the moment the lock
// may be lost. Throws what the acquire throws; lock_lost (system_error) if
// the lock was lost before or during the body (also when the body completed
// meanwhile); otherwise what the body throws.
template <class Body>
auto with_lock(mutex& m, Body body) -> decltype(body()) {
  using result_type = typename decltype(body())::value_type;
  auto held = co_await m.async_acquire(asio::use_awaitable);
  std::exception_ptr failure;
  std::optional<std::conditional_t<std::is_void_v<result_type>, bool, result_type>> result;
  try {
    auto run = asio::co_spawn(held.get_executor(), detail::run_under<result_type>(held, body),
                              asio::use_awaitable);
    if constexpr (std::is_void_v<result_type>) {
      co_await std::move(run);
      result.emplace(true);
    } else {
      result.emplace(co_await std::move(run));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  std::error_code released;
  co_await held.async_release(asio::redirect_error(asio::use_awaitable, released));
  if (released == error::lock_lost) throw std::system_error(released, "with_lock");
  if (failure) std::rethrow_exception(failure);
  if (released) throw std::system_error(released, "with_lock");
  if constexpr (!std::is_void_v<result_type>) co_return std::move(*result);
}

}  // namespace zkasio
