// zkasio::session: one ZooKeeper session, driven by an Asio executor, with
// every operation an Asio asynchronous operation.
//
// The session runs the single-threaded C client on a strand of the executor
// it is given and creates no thread. Every member function may be called from
// any thread; handlers run on their own associated executor (the session's
// executor when they have none).
//
// Cancellation (bind_cancellation_slot, `op || timer`, co_spawn): every
// operation honours terminal and partial cancellation, reads, watches,
// connect and wait_state_change also total, by completing at once with
// asio::error::operation_aborted. A request
// already sent cannot be called back: a cancelled write may still be applied
// by the server (a cancelled create may have created the node, a cancelled
// remove may have removed it, a cancelled multi may have been applied whole);
// recipes that need certainty find out by reading. A cancelled watch leaves no
// watch on the server. A cancelled connect or wait_state_change only stops
// waiting.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <concepts>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <variant>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
#include <zkasio/detail/session_core.hpp>
#include <zkasio/error.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/operations.hpp>
#include <zkasio/session_options.hpp>

namespace zkasio {

// The completion token of every zkasio operation called without one, on
// every Asio version: asio::use_awaitable (Asio's own default changes from
// none to deferred with its version), so `co_await m.async_acquire();` works
// in an asio::awaitable<T> coroutine. In a coroutine of another executor
// type (asio::awaitable<T, asio::strand<...>>), pass
// asio::use_awaitable_t<that executor>{}; the with_* helpers follow their
// body's executor type by themselves.
using default_token = asio::use_awaitable_t<>;

class session;

namespace detail {
// A completion token, as opposed to the optional argument before it.
template <class Token, class Optional>
concept token_not = !std::is_convertible_v<std::decay_t<Token>, Optional>;

// A node's path or data as the operations take it: anything a string_view
// is made of. An operation keeps its own copy (it may be launched later),
// so a std::string passed as an rvalue is moved, not copied.
template <class T>
concept text = std::is_convertible_v<T, std::string_view>;
template <class Text>
std::string owned_text(Text&& t) {
  if constexpr (std::is_same_v<std::remove_cvref_t<Text>, std::string> && !std::is_lvalue_reference_v<Text>)
    return std::move(t);
  else {
    std::string_view view = t;  // (the implicit conversion the concept checks)
    return std::string(view);
  }
}

// For zkasio's recipes: the session's engine, whose identity and generation
// tell which ZooKeeper session a node belongs to; and a view of the session,
// which refers to its engine without keeping it: what outlives the user's
// session object (a background release, a monitor) gets session_closed from
// it, never a dangling pointer, and what waits on the session (and holds a
// view) never keeps the session's engine alive in a cycle.
struct session_access {
  static std::shared_ptr<session_core> core(const session& s);
  static session view(const session& s);
};
}  // namespace detail

class session {
 public:
  using executor_type = asio::any_io_executor;

  // Starts connecting at once; async_connect waits for it.
  session(const executor_type& executor, session_options options);
  template <class ExecutionContext>
    requires std::is_convertible_v<ExecutionContext&, asio::execution_context&>
  session(ExecutionContext& context, session_options options)
      : session(executor_type(context.get_executor()), std::move(options)) {}

  // Closes the session in the background; pending operations complete with
  // error::session_closed.
  ~session();
  session(session&&) noexcept = default;
  session& operator=(session&&) noexcept;  // closes the session it replaces
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  executor_type get_executor() const noexcept { return executor_; }
  // The connect string it was given (session_options::hosts).
  const std::string& hosts() const noexcept {
    static const std::string moved_from;
    return hosts_ ? *hosts_ : moved_from;
  }

  // Observers, safe from any thread.
  session_state state() const noexcept {
    return observe([](const core& c) { return c.state(); }, session_state::closed);
  }
  // 0 before the first connection, and with reconnect_on_expiry from an
  // expiry until the next session's handshake: read after generation(), it
  // is that generation's id or 0, never an earlier one's.
  std::int64_t id() const noexcept {
    return observe([](const core& c) { return c.id(); }, std::int64_t{0});
  }
  // Counts the ZooKeeper sessions started after expiry: when it changes, every
  // ephemeral node and watch of the earlier session is gone. With
  // reconnect_on_expiry it changes before the state says expired (so a
  // thread that sees expired sees the new generation: a session follows).
  std::uint64_t generation() const noexcept {
    return observe([](const core& c) { return c.generation(); }, std::uint64_t{0});
  }
  // Why the session ended for good when a failure ended it, naming what
  // failed: the C client refused the connect string as malformed
  // (zk_error::bad_arguments, a caller_fault), no host of the connect string
  // resolved (error::unresolvable_host), or a server answered as no
  // ZooKeeper server does (error::not_zookeeper: "127.0.0.1:8080 answered
  // the handshake as no ZooKeeper server does (negotiated session timeout
  // 540291120 ms, session id ...): is it a ZooKeeper server's client
  // port?"). Empty otherwise. Its operations then fail with that error;
  // state() is closed.
  std::string failure() const {
    return observe([](const core& c) { return c.failure(); }, std::string());
  }
  // Whether async_add_auth was called: the session then has an identity
  // beyond world:anyone (in every ZooKeeper session it starts).
  bool authenticated() const noexcept {
    return observe([](const core& c) { return c.authenticated(); }, false);
  }
  std::chrono::milliseconds negotiated_timeout() const noexcept {
    return observe([](const core& c) { return c.negotiated_timeout(); }, std::chrono::milliseconds{0});
  }
  // A time at which the server that can expire the session (the ensemble's
  // leader; a standalone server is its own) is known to have seen it: no
  // server expires the session before last_contact() + negotiated_timeout().
  // The handshake of the current connection, or the time a request was sent
  // whose answer came at least a tick (session_options::server_tick_time)
  // before a later request through the leader (a write or a sync) was sent
  // and answered: a follower tells its leader of a session's activity only
  // in its replies to the leader's pings, every half tick, so an answer from
  // a follower proves nothing of the leader's sight until such a later
  // answer (docs/guarantees.md has the arithmetic). The session keeps a sync
  // in flight every eighth of the timeout without one, so an idle session's
  // last_contact() is at most a tick, two eighths of the timeout and two
  // round trips old.
  std::chrono::steady_clock::time_point last_contact() const noexcept {
    return observe([](const core& c) { return c.last_contact(); }, std::chrono::steady_clock::time_point{});
  }

  // Completes once connected; at once if connected already. Fails with
  // session_expired / auth_failed / session_closed when the session cannot
  // connect any more. void(error_code)
  template <class Token = default_token>
  auto async_connect(Token&& token = {}) {
    return initiate<>(detail::read_cancellation, [](core& c, auto done) { c.connect(std::move(done)); }, std::forward<Token>(token));
  }

  // Completes with the new state as soon as the state differs from `known`.
  // void(error_code, session_state)
  template <class Token = default_token>
  auto async_wait_state_change(session_state known, Token&& token = {}) {
    return initiate<session_state>(detail::read_cancellation, [known](core& c, auto done) { c.wait_state_change(known, std::move(done)); },
                                   std::forward<Token>(token));
  }

  // void(error_code, created)
  template <detail::text Path = std::string_view, detail::text Data = std::string_view, class Token = default_token>
    requires detail::token_not<Token, create_options>
  auto async_create(Path&& path, Data&& data, Token&& token = {}) {
    return async_create(std::forward<Path>(path), std::forward<Data>(data), create_options{}, std::forward<Token>(token));
  }
  template <detail::text Path = std::string_view, detail::text Data = std::string_view, class Token = default_token>
  auto async_create(Path&& path, Data&& data, create_options options,
                    Token&& token = {}) {
    return initiate<created>(detail::write_cancellation,
                             [path = detail::owned_text(std::forward<Path>(path)), data = detail::owned_text(std::forward<Data>(data)), options = std::move(options), pin = pinned_](
                                 core& c, auto done) mutable {
                               c.create(std::move(path), std::move(data), std::move(options), pin, std::move(done));
                             },
                             std::forward<Token>(token));
  }

  // void(error_code)
  template <detail::text Path = std::string_view, class Token = default_token>
    requires detail::token_not<Token, std::int32_t>
  auto async_remove(Path&& path, Token&& token = {}) {
    return async_remove(std::forward<Path>(path), any_version, std::forward<Token>(token));
  }
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_remove(Path&& path, std::int32_t version, Token&& token = {}) {
    return initiate<>(detail::write_cancellation, [path = detail::owned_text(std::forward<Path>(path)), version, pin = pinned_](core& c, auto done) mutable {
                        c.remove(std::move(path), version, pin, std::move(done));
                      },
                      std::forward<Token>(token));
  }

  // The node's stat, or nullopt when it does not exist. void(error_code, optional<stat>)
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_exists(Path&& path, Token&& token = {}) {
    return initiate<std::optional<node_stat>>(detail::read_cancellation,
                                         [path = detail::owned_text(std::forward<Path>(path))](core& c, auto done) mutable {
                                           c.exists(std::move(path), std::move(done));
                                         },
                                         std::forward<Token>(token));
  }

  // void(error_code, node_data)
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_get_data(Path&& path, Token&& token = {}) {
    return initiate<node_data>(detail::read_cancellation, [path = detail::owned_text(std::forward<Path>(path))](core& c, auto done) mutable {
                                 c.get_data(std::move(path), std::move(done));
                               },
                               std::forward<Token>(token));
  }

  // The node's new stat. void(error_code, stat)
  template <detail::text Path = std::string_view, detail::text Data = std::string_view, class Token = default_token>
    requires detail::token_not<Token, std::int32_t>
  auto async_set_data(Path&& path, Data&& data, Token&& token = {}) {
    return async_set_data(std::forward<Path>(path), std::forward<Data>(data), any_version, std::forward<Token>(token));
  }
  template <detail::text Path = std::string_view, detail::text Data = std::string_view, class Token = default_token>
  auto async_set_data(Path&& path, Data&& data, std::int32_t version,
                      Token&& token = {}) {
    return initiate<node_stat>(detail::write_cancellation,
                          [path = detail::owned_text(std::forward<Path>(path)), data = detail::owned_text(std::forward<Data>(data)), version, pin = pinned_](core& c, auto done) mutable {
                            c.set_data(std::move(path), std::move(data), version, pin, std::move(done));
                          },
                          std::forward<Token>(token));
  }

  // void(error_code, children)
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_get_children(Path&& path, Token&& token = {}) {
    return initiate<children>(detail::read_cancellation, [path = detail::owned_text(std::forward<Path>(path))](core& c, auto done) mutable {
                                c.get_children(std::move(path), std::move(done));
                              },
                              std::forward<Token>(token));
  }

  // ZooKeeper's sync: the server this session is connected to catches up
  // with the leader, so that the reads sent after it see every write the
  // leader had committed when it was handled. void(error_code)
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_sync(Path&& path, Token&& token = {}) {
    return initiate<>(detail::read_cancellation, [path = detail::owned_text(std::forward<Path>(path))](core& c, auto done) mutable {
                        c.sync(std::move(path), std::move(done));
                      },
                      std::forward<Token>(token));
  }

  // Applies all operations or none. The error is the first failing
  // operation's; the results say which. void(error_code, vector<op_result>)
  template <class Token = default_token>
  auto async_multi(std::vector<multi_op> ops, Token&& token = {}) {
    return initiate<std::vector<op_result>>(detail::write_cancellation,
                                            [ops = std::move(ops), pin = pinned_](core& c, auto done) mutable {
                                              c.multi(std::move(ops), pin, std::move(done));
                                            },
                                            std::forward<Token>(token));
  }

  // Completes when the node is deleted; at once if it does not exist.
  // void(error_code)
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_wait_deleted(Path&& path, Token&& token = {}) {
    return initiate<>(detail::read_cancellation, [path = detail::owned_text(std::forward<Path>(path))](core& c, auto done) mutable {
                        c.wait_deleted(std::move(path), std::move(done));
                      },
                      std::forward<Token>(token));
  }

  // Completes once the node exists: at once if it does (no watch is left),
  // else at its creation (an exists watch, set on the missing node, and
  // withdrawn from the server if cancelled). void(error_code)
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_wait_created(Path&& path, Token&& token = {}) {
    return initiate<>(detail::read_cancellation, [path = detail::owned_text(std::forward<Path>(path))](core& c, auto done) mutable {
                        c.wait_created(std::move(path), std::move(done));
                      },
                      std::forward<Token>(token));
  }

  // Completes with data_changed or deleted at the node's next change; at once
  // when its version already differs from `known_version` (any_version: wait
  // for the next change). Fails with no_node when it does not exist and no
  // version was known. void(error_code, event_type)
  template <detail::text Path = std::string_view, class Token = default_token>
    requires detail::token_not<Token, std::int32_t>
  auto async_wait_data_changed(Path&& path, Token&& token = {}) {
    return async_wait_data_changed(std::forward<Path>(path), any_version, std::forward<Token>(token));
  }
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_wait_data_changed(Path&& path, std::int32_t known_version,
                               Token&& token = {}) {
    return initiate<event_type>(detail::read_cancellation,
                                [path = detail::owned_text(std::forward<Path>(path)), known_version](core& c, auto done) mutable {
                                  c.wait_data_changed(std::move(path), known_version, std::move(done));
                                },
                                std::forward<Token>(token));
  }

  // The same for the node's children (children_changed or deleted), against
  // the node's cversion.
  template <detail::text Path = std::string_view, class Token = default_token>
    requires detail::token_not<Token, std::int32_t>
  auto async_wait_children_changed(Path&& path, Token&& token = {}) {
    return async_wait_children_changed(std::forward<Path>(path), any_version, std::forward<Token>(token));
  }
  template <detail::text Path = std::string_view, class Token = default_token>
  auto async_wait_children_changed(Path&& path, std::int32_t known_cversion,
                                   Token&& token = {}) {
    return initiate<event_type>(detail::read_cancellation,
                                [path = detail::owned_text(std::forward<Path>(path)), known_cversion](core& c, auto done) mutable {
                                  c.wait_children_changed(std::move(path), known_cversion, std::move(done));
                                },
                                std::forward<Token>(token));
  }

  // Adds authentication ("digest", "user:password") to the session; kept
  // across reconnections, and added again to the session that follows an
  // expiry (session_options::reconnect_on_expiry) before its requests. void(error_code)
  template <class Token = default_token>
  auto async_add_auth(std::string_view scheme, std::string_view credentials, Token&& token = {}) {
    return initiate<>(detail::write_cancellation,
                      [scheme = std::string(scheme), credentials = std::string(credentials)](
                          core& c, auto done) mutable {
                        c.add_auth(std::move(scheme), std::move(credentials), std::move(done));
                      },
                      std::forward<Token>(token));
  }

  // Completes once the server that can expire the session is known to have
  // seen it since this operation started: last_contact() is then later than
  // the start. Takes a tick and two round trips at most while connected
  // (a sync, and a sync a tick after its answer); waits across a
  // disconnection (a reconnection's handshake confirms it); fails with the
  // session's end. For a lease of the caller's own: a grant decided on
  // replies that may be old (the process was paused) is sure again after
  // it. void(error_code)
  template <class Token = default_token>
  auto async_confirm_contact(Token&& token = {}) {
    return initiate<>(detail::read_cancellation, [](core& c, auto done) { c.confirm_contact(std::move(done)); },
                      std::forward<Token>(token));
  }

  // A view of this session (it must outlive the view) whose writes belong to
  // the ZooKeeper session `generation` (by default, the current one,
  // generation()): each write through it (async_create, async_remove,
  // async_set_data, async_multi) fails with session_expired, unsent, once
  // that ZooKeeper session has ended, also when it waited for the connection
  // meanwhile. A write decided on what one ZooKeeper session saw (the node
  // it owns, the version it read) is never sent in the session that follows
  // an expiry, where it would act on another session's nodes. Its reads and
  // watches are the session's.
  session pinned() const { return pinned(generation()); }
  session pinned(std::uint64_t generation) const {
    session view(view_tag{}, *this);
    view.pinned_ = generation;
    return view;
  }

  // Ends the session: connected, its ephemeral nodes go at once; disconnected,
  // when the server expires it. Pending and later operations complete with
  // session_closed. Cancelling only stops waiting: the close goes on.
  // void(error_code)
  template <class Token = default_token>
  auto async_close(Token&& token = {}) {
    return initiate<>(detail::write_cancellation, [](core& c, auto done) { c.close(std::move(done)); }, std::forward<Token>(token));
  }

 private:
  friend struct detail::session_access;
  using core = detail::session_core;
  struct view_tag {};
  session(view_tag, const session& owner)
      : executor_(owner.executor_), hosts_(owner.hosts_), view_(owner.weak()), pinned_(owner.pinned_) {}
  std::weak_ptr<core> weak() const noexcept { return core_ ? std::weak_ptr<core>(core_) : view_; }
  // f(engine), or `gone` when the session (of a view) is no more.
  template <class F, class T>
  T observe(F f, T gone) const noexcept {
    if (core_) return f(*core_);
    auto c = view_.lock();
    return c ? f(*c) : gone;
  }

  // One operation: make its completion from the handler, then submit it on the
  // strand. Requests are sent in the order they reach the strand, the server
  // answers a session's requests in order and the C client completes them in
  // that order (zkasio::mutex relies on it: see send_create in src/recipes/engine/acquire_runner.cpp). The initiation holds the core weakly: with use_awaitable it lives
  // in the awaiting frame, which the pending operation (owned by the core) holds.
  template <class... Values, class Submit, class Token>
  auto initiate(asio::cancellation_type honoured, Submit submit, Token&& token) {
    return asio::async_initiate<Token, void(error_code, Values...)>(
        [](auto handler, std::weak_ptr<core> weak, executor_type executor,
           asio::cancellation_type honoured, Submit submit) {
          auto c = weak.lock();
          if (!c) {  // the session was destroyed or moved from before the operation started
            detail::make_completion<Values...>(std::move(handler), executor, executor, honoured)
                ->complete(make_error_code(error::session_closed), Values{}...);
            return;
          }
          auto done = detail::make_completion<Values...>(std::move(handler), executor,
                                                         c->strand(), honoured);
          auto& strand = c->strand();
          asio::dispatch(strand, [c = std::move(c), done = std::move(done),
                                  submit = std::move(submit)]() mutable {
            submit(*c, std::move(done));
          });
        },
        token, weak(), executor_, honoured, std::move(submit));
  }

  executor_type executor_;
  std::shared_ptr<const std::string> hosts_;  // (shared with its views: a view is made per pinned write)
  std::shared_ptr<core> core_;  // the owner's: closed when it is destroyed
  std::weak_ptr<core> view_;    // a view's (session_access::view)
  std::optional<std::uint64_t> pinned_;  // a pinned view's generation (pinned())
};

// For a program that should end once its work is done (a session keeps its
// executor's run() from returning until it is closed): an awaitable (of the
// body's executor type) that runs `body(s)` (an asio::awaitable), then closes
// `s` whatever the outcome (cancelled
// too: a cancellation ends the body, never the close), and gives the body's
// result, or rethrows its exception, once the session is closed. `s` must
// outlive it. The close's own error is not reported: the session is closed
// either way.
//   asio::co_spawn(io, zkasio::with_session(zk, work), handler);
// Awaited inside a larger coroutine, it leaves that coroutine's cancellation
// state as a new one's (terminal cancellation only): Asio keeps one state per
// spawned chain of coroutines, and the close must ignore it meanwhile.
template <class Body>
  requires std::invocable<Body&, session&>
std::invoke_result_t<Body&, session&> with_session(session& s, Body body) {
  using result_type = typename std::invoke_result_t<Body&, session&>::value_type;
  using executor_type = typename std::invoke_result_t<Body&, session&>::executor_type;
  using stored = std::conditional_t<std::is_void_v<result_type>, std::monostate, result_type>;
  std::optional<stored> result;
  std::exception_ptr failure;
  try {
    if constexpr (std::is_void_v<result_type>) {
      co_await body(s);
      result.emplace();
    } else {
      result.emplace(co_await body(s));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // A cancellation of the body (cleared by the reset) must not keep the close
  // from being sent, nor a later one end the wait for it.
  co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) {
    return asio::cancellation_type::none;
  });
  error_code closed;
  co_await s.async_close(asio::redirect_error(asio::use_awaitable_t<executor_type>{}, closed));
  co_await asio::this_coro::reset_cancellation_state();
  if (failure) std::rethrow_exception(failure);
  if constexpr (!std::is_void_v<result_type>) co_return std::move(*result);
}

inline std::shared_ptr<detail::session_core> detail::session_access::core(const session& s) {
  return s.weak().lock();
}
inline session detail::session_access::view(const session& s) { return session(session::view_tag{}, s); }

}  // namespace zkasio
