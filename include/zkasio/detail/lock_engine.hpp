// The contender engine: the one machine under every lock recipe.
//
// A contender creates one EPHEMERAL_SEQUENTIAL node, Curator-named
// ("_c_<uuid>-<lock name><sequence>", see src/recipes/rules/lock_queue.hpp), under the lock
// path and lists the children in the same round trip; it waits for the
// nearest node ahead of it that blocks it (decide: the recipe's rule is the
// node kinds of its queue and `blocks`), in this process when that node is
// one of its own session's (known_nodes), else with a watch; it is granted
// when nothing ahead blocks it and its node is still there. A lost create
// reply is answered by finding the node by its uuid; whatever ends an
// attempt, its node is deleted in the background, never another session's.
// A holder's node and session are monitored until it is released (the lost
// signal), and the release's delete is retried while the session lives.
//
// One engine_state per lock object (mutex, shared_mutex): its strand runs
// all of it; the process-wide knowledge of nodes it shares with every other
// lock object on the same path is known_nodes.
//
// Every operation starts by a start_* function (here and in lock.hpp), called
// inside async_initiate on the thread that launches it, which moves to the
// strand itself (asio::dispatch: at once when launched on the strand); an
// operation cancelled before it gets there finds its completion done.
#pragma once

#include <algorithm>
#include <asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <vector>
#include <zkasio/detail/completion.hpp>
#include <zkasio/detail/node_kind.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>

namespace zkasio::detail {

// Throws invalid_path (system_error) for a path that cannot be a lock path,
// invalid_policy for lost_policy::on_expiry but for `own_node` (a node of the
// user's own recipe: async_hold_node). `strand`: another engine's, to run on
// one strand with it (a semaphore's two); else a new one.
std::shared_ptr<engine_state> make_engine(session& s, std::string_view path, mutex_options options,
                                          queue_family family, std::optional<lock_strand> strand = std::nullopt,
                                          bool own_node = false);
// The options of an engine inside a recipe (a semaphore's mutex): the user's
// observer hears the recipe, not its parts.
inline mutex_options without_observer(mutex_options options) {
  options.observer = {};
  return options;
}
lock_strand strand_of(const engine_state& engine);
const std::string& path_of(const engine_state& engine);
queue_family family_of(const engine_state& engine);

// One acquire. Reentrancy by owner (the holds of `who` on this lock object):
// a hold of the same kind is granted again (lock_lost if lost); a write hold
// asking for a read lock takes one at once, at the write node's place in the
// queue (Curator's downgrade); a read hold asking for the write lock fails
// with would_deadlock.
struct acquire_request {
  node_kind kind = node_kind::lock;
  std::optional<owner> who = std::nullopt;
  bool try_once = false;  // lock_busy instead of waiting
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt;
  std::optional<std::chrono::steady_clock::duration> timeout = std::nullopt;  // from the start: see started()
  std::optional<std::string> data = std::nullopt;  // written into the node; else the options' data
  bool confirm_owner = false;  // granted only once the node is seen owned by this session
};
// A user's acquire of nodes of `kind` with its options.
inline acquire_request request_of(node_kind kind, const acquire_options& options) {
  return {.kind = kind, .who = options.who, .deadline = options.deadline, .timeout = options.timeout};
}
// Starts the acquire; `done` completes with the lock or why not. Each
// attempt is a state machine without I/O driven by one runner
// (src/recipes/engine/acquire_runner.cpp): the fair recipes' fair_acquire,
// and the race recipes' race_acquire (race_mutex, election's race mode: one
// EPHEMERAL node at the engine's path, created by whoever is first; the
// others wait for its deletion and race again: the non-fair lock;
// within a session, contenders take turns in the process, local_turns.hpp;
// `kind` is ignored).
void start_acquire(const std::shared_ptr<engine_state>& engine, acquire_request request, completion_ptr<lock> done);
// n leases of a semaphore at once (Curator's InterProcessSemaphoreV2): its
// mutex `locks` taken (so one acquirer at a time waits for room), a lease
// node created under `leases` for each, granted once the leases' children are
// at most `max`. invalid_lease_count unless 1 <= count <= max.
struct lease_request {
  std::size_t count = 1;
  std::size_t max = 1;
  bool try_once = false;
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt;
  std::optional<std::chrono::steady_clock::duration> timeout = std::nullopt;  // from the start: see started()
};

// A request as its operation starts: a timeout (async_acquire_for and the
// like) counts from now, when the operation is launched, not from when it
// was made (a deferred acquire launched later waits its whole timeout); with
// a deadline as well, the earlier of the two.
template <class Request>
Request started(Request request) {
  if (request.timeout) {
    using clock = std::chrono::steady_clock;
    auto now = clock::now();
    auto timeout = *std::exchange(request.timeout, {});
    auto end = timeout > clock::time_point::max() - now ? clock::time_point::max() : now + timeout;  // (no overflow)
    request.deadline = request.deadline ? std::min(*request.deadline, end) : end;
  }
  return request;
}
// Starts it; `done` completes with the leases or why not.
void start_acquire_leases(const std::shared_ptr<engine_state>& leases, const std::shared_ptr<engine_state>& locks,
                          lease_request request, completion_ptr<std::vector<lock>> done);

// A node of the user's own recipe held as a lock (see async_hold_node,
// hold_node.hpp), on an engine of its own at the node's path, on `strand`
// (src/recipes/engine/engine_hold.cpp).
void start_hold_node(session& s, std::string node, lock_options options, lock_strand strand,
                     completion_ptr<lock> done);

// The observers' starts (src/recipes/engine/engine_leader.cpp): `done`
// completes with the answer or why not. A cancellation completes it at once;
// what was sent goes on (a revocation may still be written).
// Who holds the engine's one place now: the first of an election's queue, or
// the race node's creator; nullopt when nobody does.
void start_current_leader(const std::shared_ptr<engine_state>& engine, completion_ptr<std::optional<leader>> done);
// As soon as the holder differs from `last_seen`, the new one (at once if it
// differs already: no change between two calls is missed).
void start_leader_change(const std::shared_ptr<engine_state>& engine, std::optional<leader> last_seen,
                         completion_ptr<std::optional<leader>> done);
// The queue, in order: the holder(s) first.
void start_contenders(const std::shared_ptr<engine_state>& engine, completion_ptr<std::vector<contender>> done);
// Curator's revocation: "__REVOKE__" written into the contender's node.
void start_revoke(const std::shared_ptr<engine_state>& engine, std::string node, completion_ptr<> done);

// What an operation completes with, made of what the engine gives: an
// election's leadership of its lock; one lease of the leases acquired.
template <class T, class From>
T made_of(From from) {
  if constexpr (std::is_same_v<From, std::vector<lock>>) return from.empty() ? lock{} : std::move(from.front());
  else return T(std::move(from));
}

template <class T>
struct make_of {
  template <class From>
  T operator()(error_code, From from) const {
    return made_of<T>(std::move(from));
  }
};

// An engine's completion (of a From) that completes `outer` with the T that
// `make(ec, from)` makes of it. `make` runs only while `outer` is pending:
// what would be made of an outcome that comes after the cancellation (a
// hold, say) is never made.
template <class T, class From, class Make>
class completion_as final : public completion<From> {
 public:
  completion_as(completion_ptr<T> outer, Make make) : outer_(std::move(outer)), make_(std::move(make)) {}

 private:
  void deliver(error_code ec, From from) override {
    if (outer_->done()) return;
    outer_->complete(ec, make_(ec, std::move(from)));
  }
  completion_ptr<T> outer_;
  Make make_;
};

// The completion of a From that completes `outer` through `make`
// (completion_as); `outer`'s cancellation cancels it.
template <class From, class T, class Make>
completion_ptr<From> completion_through(const completion_ptr<T>& outer, Make make) {
  completion_ptr<From> inner = std::make_shared<completion_as<T, From, Make>>(outer, std::move(make));
  outer->on_cancel = [weak = std::weak_ptr<completion<From>>(inner)] {
    if (auto c = weak.lock()) c->cancel();
  };
  return inner;
}

// The completion of the user's `handler` (on the engine's strand, cancelled
// by its slot: terminal and partial; total is not honoured, the operation
// has effects), as the engine's completion of a From.
template <class T, class From, class Handler>
completion_ptr<From> engine_completion(Handler&& handler, const lock_strand& strand) {
  auto outer = make_completion<T>(std::forward<Handler>(handler), strand, strand, write_cancellation);
  if constexpr (std::is_same_v<T, From>) return outer;
  else return completion_through<From>(outer, make_of<T>{});
}

// The acquire as an asynchronous operation, completing with a T made of the
// lock (a lock, or an election's leadership): terminal and partial
// cancellation complete it at once with operation_aborted (its node goes in
// the background); total is not honoured (it has effects).
template <class T, class Token>
auto async_acquire_as(const std::shared_ptr<engine_state>& engine, acquire_request request, Token&& token) {
  return asio::async_initiate<Token, void(error_code, T)>(
      [](auto handler, std::shared_ptr<engine_state> engine, acquire_request request) {
        auto done = engine_completion<T, lock>(std::move(handler), strand_of(*engine));
        start_acquire(engine, started(std::move(request)), std::move(done));
      },
      token, engine, std::move(request));
}
template <class Token>
auto async_acquire(const std::shared_ptr<engine_state>& engine, acquire_request request, Token&& token) {
  return async_acquire_as<lock>(engine, std::move(request), std::forward<Token>(token));
}
// Leases (a vector of locks) or one lease (a lock), as an asynchronous
// operation: cancelled as an acquire is (its nodes go in the background).
template <class T, class Token>
auto async_acquire_leases(const std::shared_ptr<engine_state>& leases, const std::shared_ptr<engine_state>& locks,
                          lease_request request, Token&& token) {
  return asio::async_initiate<Token, void(error_code, T)>(
      [](auto handler, std::shared_ptr<engine_state> leases, std::shared_ptr<engine_state> locks,
         lease_request request) {
        auto done = engine_completion<T, std::vector<lock>>(std::move(handler), strand_of(*leases));
        start_acquire_leases(leases, locks, started(request), std::move(done));
      },
      token, leases, locks, request);
}
// An observer's operation: `start(engine, args..., done)`, completing with
// void(error_code, Values...) on the handler's executor.
template <class... Values, class Token, class Start, class... Args>
auto async_observe(asio::cancellation_type honoured, const std::shared_ptr<engine_state>& engine, Start start,
                   Token&& token, Args... args) {
  return asio::async_initiate<Token, void(error_code, Values...)>(
      [](auto handler, std::shared_ptr<engine_state> engine, asio::cancellation_type honoured, Start start,
         Args... args) {
        auto strand = strand_of(*engine);
        start(engine, std::move(args)..., make_completion<Values...>(std::move(handler), strand, strand, honoured));
      },
      token, engine, honoured, start, std::move(args)...);
}
template <class Token>
auto async_current_leader(const std::shared_ptr<engine_state>& engine, Token&& token) {
  return async_observe<std::optional<leader>>(read_cancellation, engine, &start_current_leader,
                                              std::forward<Token>(token));
}
template <class Token>
auto async_leader_change(const std::shared_ptr<engine_state>& engine, std::optional<leader> last_seen,
                         Token&& token) {
  return async_observe<std::optional<leader>>(read_cancellation, engine, &start_leader_change,
                                              std::forward<Token>(token), std::move(last_seen));
}
template <class Token>
auto async_contenders(const std::shared_ptr<engine_state>& engine, Token&& token) {
  return async_observe<std::vector<contender>>(read_cancellation, engine, &start_contenders,
                                               std::forward<Token>(token));
}
template <class Token>
auto async_revoke(const std::shared_ptr<engine_state>& engine, std::string_view node, Token&& token) {
  return async_observe<>(write_cancellation, engine, &start_revoke, std::forward<Token>(token), std::string(node));
}

// What every lock object (mutex, race_mutex, shared_mutex, semaphore,
// election) is: a handle on its engine for one path.
//
// One lock object, as a std::mutex is one mutex: not copied (two objects on
// one path are two, each with its own contenders and reentrancy); moved as an
// Asio I/O object is (a moved-from one may only be destroyed or assigned).
class engine_handle {
 public:
  using executor_type = asio::any_io_executor;  // a strand

  engine_handle(const engine_handle&) = delete;
  engine_handle& operator=(const engine_handle&) = delete;
  engine_handle(engine_handle&&) noexcept = default;
  engine_handle& operator=(engine_handle&&) noexcept = default;

  executor_type get_executor() const { return strand_of(*state_); }
  const std::string& path() const { return path_of(*state_); }

 protected:
  // The session must outlive the lock object and every lock of it, and must
  // not be assigned another session meanwhile.
  engine_handle(session& s, std::string_view path, mutex_options options, queue_family family)
      : state_(make_engine(s, path, std::move(options), family)) {}
  ~engine_handle() = default;

  std::shared_ptr<engine_state> state_;
};

// A lock object whose queue a user may list and revoke (mutex, shared_mutex,
// semaphore): the operations that do not depend on the recipe's rule.
class lock_object : public engine_handle {
 public:
  // The queue, in order: who holds (first) and who waits (contender::shared
  // tells a shared_mutex's readers). void(error_code, vector<contender>)
  template <class Token = default_token>
  auto async_contenders(Token&& token = {}) {
    return detail::async_contenders(state_, std::forward<Token>(token));
  }

  // Asks the holder of `node` (a contender's node: its full path, as
  // lock::node() and contender::node give it) to release, with Curator's
  // protocol ("__REVOKE__" written into the node): its lost signal fires.
  // not_held when there is no such contender; invalid_path for a path not
  // under the lock's. void(error_code)
  template <class Token = default_token>
  auto async_revoke(std::string_view node, Token&& token = {}) {
    return detail::async_revoke(state_, node, std::forward<Token>(token));
  }

 protected:
  using engine_handle::engine_handle;
};

// The acquire operations of the exclusive locks (mutex, race_mutex, and
// shared_mutex's write lock: nodes of `Kind`), on the engine
// `Derived::state_` (Derived befriends this).
template <class Derived, node_kind Kind = node_kind::lock>
class exclusive_acquire {
 public:
  // Waits for the lock. void(error_code, lock)
  template <class Token = default_token>
    requires detail::token_not<Token, acquire_options>  // options are the other overload's
  auto async_acquire(Token&& token = {}) {
    return detail::async_acquire(engine(), {.kind = Kind}, std::forward<Token>(token));
  }
  // With options (lock.hpp's acquire_options): reentrant by an owner, a
  // deadline or timeout, or both.
  template <class Token = default_token>
  auto async_acquire(const acquire_options& options, Token&& token = {}) {
    return detail::async_acquire(engine(), request_of(Kind, options), std::forward<Token>(token));
  }
  // Takes the lock only if it is free at once (mutex: nobody holds it or
  // waits before us): fails with lock_busy otherwise, leaving no node behind.
  template <class Token = default_token>
  auto async_try_acquire(Token&& token = {}) {
    return detail::async_acquire(engine(), {.kind = Kind, .try_once = true}, std::forward<Token>(token));
  }
  // Waits until `deadline` at most (connecting included): then lock_timeout,
  // and the node is deleted.
  template <class Token = default_token>
  auto async_acquire_until(std::chrono::steady_clock::time_point deadline, Token&& token = {}) {
    return detail::async_acquire(engine(), {.kind = Kind, .deadline = deadline}, std::forward<Token>(token));
  }
  // The same, `timeout` from when the operation starts.
  template <class Token = default_token>
  auto async_acquire_for(std::chrono::steady_clock::duration timeout, Token&& token = {}) {
    return detail::async_acquire(engine(), {.kind = Kind, .timeout = timeout}, std::forward<Token>(token));
  }

 private:
  const std::shared_ptr<engine_state>& engine() const { return static_cast<const Derived&>(*this).state_; }
};

}  // namespace zkasio::detail
