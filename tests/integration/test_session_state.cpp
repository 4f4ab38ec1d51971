// Session state against private servers that the tests pause, cut off,
// restart and let expire sessions: suspended, expired, reconnected, and what
// pending operations see meanwhile.
#include <doctest/doctest.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <thread>
#include <zkasio/session.hpp>

#include "support/async.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using asio::awaitable;
using asio::use_awaitable;

namespace {

// Waits until the session's state is `wanted` (bounded).
awaitable<bool> reach(session& s, session_state wanted, std::chrono::milliseconds timeout = 15s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (s.state() != wanted) {
    asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
    auto r = co_await (s.async_wait_state_change(s.state(), use_awaitable) ||
                       timer.async_wait(use_awaitable));
    if (r.index() == 1) co_return false;
  }
  co_return true;
}

}  // namespace

TEST_CASE("a paused server suspends the session; resumed, it reconnects to the same session") {
  zk_servers servers;
  asio::io_context io;
  session s(io, test_options(servers.hosts(), 2s));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    auto id = s.id();
    co_await s.async_create("/eph", "", create_options{create_mode::ephemeral}, use_awaitable);
    servers.pause();
    CHECK(co_await reach(s, session_state::suspended));

    // Terminal cancellation while the server cannot answer: at once.
    asio::steady_timer timer(io, 100ms);
    auto r = co_await (s.async_get_data("/eph", use_awaitable) || timer.async_wait(use_awaitable));
    CHECK(r.index() == 1);
    zkasio::error_code ec;
    asio::steady_timer timer2(io, 100ms);
    auto w = co_await (s.async_create("/x", "", use_awaitable) || timer2.async_wait(use_awaitable));
    CHECK(w.index() == 1);

    servers.resume();
    CHECK(co_await reach(s, session_state::connected));
    CHECK(s.id() == id);
    CHECK(s.generation() == 0);
    CHECK((co_await s.async_exists("/eph", use_awaitable)).has_value());
    (void)ec;
  }());
}

TEST_CASE("operations in flight while the server is paused: each cancellation type") {
  zk_servers servers;
  asio::io_context io;
  session s(io, test_options(servers.hosts(), 10s));
  run(io, s.async_connect(use_awaitable));
  run(io, s.async_create("/node", "", use_awaitable));
  servers.pause();

  auto cancel_with = [&](asio::cancellation_type type, auto start) {
    asio::cancellation_signal signal;
    std::optional<zkasio::error_code> result;
    start(asio::bind_cancellation_slot(signal.slot(), [&](zkasio::error_code ec, auto&&...) {
      result = ec;
    }));
    signal.emit(type);
    run_until(io, [&] { return result.has_value(); }, 5s);
    return result;
  };
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    CAPTURE(static_cast<int>(type));
    for (auto* name : {"get_data", "get_children", "exists", "wait_deleted"}) {
      CAPTURE(name);
      auto result = cancel_with(type, [&](auto token) {
        std::string op = name;
        if (op == "get_data") s.async_get_data("/node", token);
        else if (op == "get_children") s.async_get_children("/node", token);
        else if (op == "exists") s.async_exists("/node", token);
        else s.async_wait_deleted("/node", token);
      });
      REQUIRE(result.has_value());
      CHECK(*result == asio::error::operation_aborted);
    }
  }
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    for (auto* name : {"create", "set_data", "remove", "multi"}) {
      CAPTURE(name);
      auto result = cancel_with(type, [&](auto token) {
        std::string op = name;
        if (op == "create") s.async_create("/new", "", token);
        else if (op == "set_data") s.async_set_data("/node", "x", token);
        else if (op == "remove") s.async_remove("/absent", token);
        else s.async_multi({op::check{"/node"}}, token);
      });
      REQUIRE(result.has_value());
      CHECK(*result == asio::error::operation_aborted);
    }
  }
  // Total cancellation promises no side effects, which a write already sent
  // cannot: it is not honoured, and the write completes once the server answers.
  asio::cancellation_signal signal;
  std::optional<zkasio::error_code> write_result;
  s.async_set_data("/node", "total", asio::bind_cancellation_slot(
                                         signal.slot(), [&](zkasio::error_code ec, node_stat) {
                                           write_result = ec;
                                         }));
  signal.emit(asio::cancellation_type::total);
  servers.resume();
  REQUIRE(run_until(io, [&] { return write_result.has_value(); }, 10s));
  CHECK(!*write_result);
}

TEST_CASE("reads are sent again after a connection loss; writes are not") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 10s));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/data", "kept", use_awaitable);
    proxy.hold_replies();
    std::optional<zkasio::error_code> read_ec, write_ec;
    node_data read;
    test_event both(io.get_executor(), 2);
    s.async_get_data("/data", [&](zkasio::error_code ec, node_data d) {
      read_ec = ec;
      read = std::move(d);
      both.count();
    });
    s.async_create("/written", "", [&](zkasio::error_code ec, created) {
      write_ec = ec;
      both.count();
    });
    proxy.drop_now();
    proxy.pass();
    CHECK(co_await both.wait());
    REQUIRE(write_ec.has_value());
    CHECK(*write_ec == zk_error::connection_loss);
    CHECK(*write_ec == condition::retryable);
    REQUIRE(read_ec.has_value());
    CHECK(!*read_ec);
    CHECK(read.data == "kept");
  }());
}

TEST_CASE("a write submitted while disconnected waits for the connection, through a reconnection that times out") {
  // The proxy holds the handshake's answer, so the C client's connection
  // attempt times out (after a third of the session timeout) and it tries
  // again. No session carried the write meanwhile: it cannot have been
  // applied, so it waits (before: the C client failed it with
  // ZOPERATIONTIMEOUT, a connection_loss whose outcome the caller could not
  // know) and is sent once connected.
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 4s));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/data", "kept", use_awaitable);
    proxy.hold_replies();
    proxy.drop_now();
    REQUIRE(co_await reach(s, session_state::suspended));
    std::optional<zkasio::error_code> write_ec;
    s.async_set_data("/data", "x", [&](zkasio::error_code ec, node_stat) { write_ec = ec; });
    // Connection attempts time out meanwhile: the write waits.
    REQUIRE(co_await eventually([&] { return proxy.connections_accepted() >= 3; }, 10s));
    CHECK_FALSE(write_ec.has_value());
    proxy.pass();
    REQUIRE(co_await reach(s, session_state::connected));
    REQUIRE(co_await eventually([&] { return write_ec.has_value(); }));
    CHECK(!*write_ec);
    CHECK((co_await s.async_get_data("/data", use_awaitable)).data == "x");
  }(), 30s);
}

// A write sent into a connection the server closed a moment before, with
// every reconnection closed at once after (a server starting up, or turning
// clients away): the C client says the connection is gone by a session event
// that it delivers only from a zookeeper_process that gets through, and
// every reconnection fails inside one. The session is suspended all the same
// (before: it said connected for as long as the reconnections failed, and
// on_suspend's lost signal waited with it).
TEST_CASE("a connection lost while every reconnection is closed at once: the session is suspended at once") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    session s(io, test_options(proxy.address(), 6s));
    run(io, [&]() -> awaitable<void> {
      co_await s.async_connect(use_awaitable);
      proxy.refuse_connections(true);
      proxy.drop_now();
      std::this_thread::sleep_for(5ms);  // closed before the write goes out
      s.async_set_data("/", "", [](zkasio::error_code, node_stat) {});
      CHECK(co_await reach(s, session_state::suspended, 3s));
      proxy.refuse_connections(false);
      CHECK(co_await reach(s, session_state::connected));
    }(), 30s);
  }
}

TEST_CASE("a lost create reply: the node exists although the create failed") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 10s));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    proxy.drop_after_next_request(15);  // ZOO_CREATE2_OP
    zkasio::error_code ec;
    co_await s.async_create("/lost-reply", "", asio::redirect_error(use_awaitable, ec));
    CHECK(proxy.wait_cut(5s));
    CHECK(ec == zk_error::connection_loss);
    co_await s.async_connect(use_awaitable);
    CHECK((co_await s.async_exists("/lost-reply", use_awaitable)).has_value());
  }());
}

TEST_CASE_FIXTURE(proxied_session, "a pinned write is refused unsent once its ZooKeeper session has ended: at submit, and after it waited for the connection") {
  // Each kind of write (create, set_data, remove, multi), pinned to the
  // first ZooKeeper session: submitted while it waits for a server and the
  // session then expires, it fails; submitted once the next session
  // connects, it fails at once; nothing of it reaches the server. Pinned to
  // the session it is sent in, a write goes.
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/pinned-mine", "", create_options{create_mode::ephemeral}, use_awaitable);
    co_await observer.async_create("/pinned-data", "before", use_awaitable);
    auto first = s.pinned();
    REQUIRE(s.generation() == 0);
    // Each kind of write through `view`, with its outcome.
    auto writes = [&](session& view, std::string tag) -> awaitable<std::vector<zkasio::error_code>> {
      using asio::experimental::as_tuple;
      std::vector<zkasio::error_code> outcomes;
      auto [create_ec, made] = co_await view.async_create("/pinned-created-" + tag, "", as_tuple(use_awaitable));
      outcomes.push_back(create_ec);
      auto [set_ec, st] = co_await view.async_set_data("/pinned-data", tag, as_tuple(use_awaitable));
      outcomes.push_back(set_ec);
      auto [remove_ec] = co_await view.async_remove("/pinned-data", as_tuple(use_awaitable));
      outcomes.push_back(remove_ec);
      std::vector<multi_op> ops;  // (not a braced list in a co_await: g++ 12 miscompiles it)
      ops.push_back(op::create{"/pinned-multi-" + tag, "", create_options{}});
      auto [multi_ec, results] = co_await view.async_multi(std::move(ops), as_tuple(use_awaitable));
      outcomes.push_back(multi_ec);
      co_return outcomes;
    };
    // Cut off: the writes wait for the connection, then the session expires.
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await reach(s, session_state::suspended));
    std::optional<std::vector<zkasio::error_code>> parked;
    asio::co_spawn(io, writes(first, "parked"), [&](std::exception_ptr, std::vector<zkasio::error_code> r) { parked = r; });
    co_await observer.async_wait_deleted("/pinned-mine", use_awaitable);  // expired on the server
    proxy.refuse_connections(false);
    co_await s.async_connect(use_awaitable);
    REQUIRE(s.generation() == 1);
    REQUIRE(co_await eventually([&] { return parked.has_value(); }));
    for (auto& ec : *parked) CHECK(ec == zk_error::session_expired);
    // Submitted in the next session, pinned to the first: at once.
    auto late = co_await writes(first, "late");
    for (auto& ec : late) CHECK(ec == zk_error::session_expired);
    // Nothing of them reached the server.
    auto [data_ec, data] = co_await observer.async_get_data("/pinned-data", asio::experimental::as_tuple(use_awaitable));
    CHECK(!data_ec);
    CHECK(data.data == "before");
    std::vector<std::string> never_made{"/pinned-created-parked", "/pinned-created-late", "/pinned-multi-parked",
                                        "/pinned-multi-late"};
    for (auto& path : never_made) CHECK_FALSE(co_await observer.async_exists(path, use_awaitable));
    // Pinned to the session they are sent in, they go.
    auto current = s.pinned();
    for (auto& ec : co_await writes(current, "now")) CHECK(!ec);
  }());
}

TEST_CASE("without reconnect_on_expiry an expired session stays expired") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  auto o = test_options(proxy.address(), 1s);
  o.reconnect_on_expiry = false;
  session s(io, o);
  session observer(io, test_options(servers.hosts(), 10s));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/mine", "", create_options{create_mode::ephemeral}, use_awaitable);
    proxy.refuse_connections(true);
    proxy.drop_now();
    co_await observer.async_wait_deleted("/mine", use_awaitable);
    proxy.refuse_connections(false);
    CHECK(co_await reach(s, session_state::expired));
    CHECK(co_await error_of([&](auto t) { return s.async_get_data("/", t); }) ==
          zk_error::session_expired);
    CHECK(co_await error_of([&](auto t) { return s.async_connect(t); }) ==
          zk_error::session_expired);
    co_await s.async_close(use_awaitable);
  }());
}

TEST_CASE("a server restart: the session reconnects and lives on") {
  zk_servers servers;
  asio::io_context io;
  session s(io, test_options(servers.hosts(), 10s));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/eph", "", create_options{create_mode::ephemeral}, use_awaitable);
    auto id = s.id();
    servers.restart();
    co_await s.async_connect(use_awaitable);
    CHECK(co_await reach(s, session_state::connected));
    CHECK((co_await s.async_exists("/eph", use_awaitable)).has_value());
    CHECK(s.id() == id);
  }());
}

TEST_CASE("an idle session keeps its last contact fresh with heartbeats") {
  zk_servers servers;
  asio::io_context io;
  session s(io, test_options(servers.hosts(), 1200ms));
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    auto first = s.last_contact();
    // Idle for a whole session timeout: only the heartbeat talks to the server.
    asio::steady_timer idle(io, s.negotiated_timeout());
    co_await idle.async_wait(use_awaitable);
    CHECK(s.last_contact() > first);
    CHECK(std::chrono::steady_clock::now() - s.last_contact() < s.negotiated_timeout() / 2);
  }());
}

TEST_CASE("closing over a dead connection does not stall the executor") {
  zk_servers servers;
  asio::io_context io;
  session s(io, test_options(servers.hosts(), 10s));
  run(io, s.async_connect(use_awaitable));
  servers.pause();
  // A ticker on the same executor: the longest gap between ticks is how long
  // the executor was blocked.
  auto longest = std::chrono::steady_clock::duration::zero();
  bool closed = false;
  run(io, [&]() -> awaitable<void> {
    asio::co_spawn(io, s.async_close(use_awaitable), [&](std::exception_ptr) { closed = true; });
    auto last = std::chrono::steady_clock::now();
    while (!closed) {
      asio::steady_timer tick(io, 20ms);
      co_await tick.async_wait(use_awaitable);
      auto now = std::chrono::steady_clock::now();
      longest = std::max(longest, now - last);
      last = now;
    }
  }());
  CHECK(s.state() == session_state::closed);
  CHECK(longest < 1s);  // zookeeper_close alone would block for seconds
  servers.resume();
}
