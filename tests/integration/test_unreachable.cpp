// What a caller sees when no ZooKeeper server can be reached, apart from a
// lock that is busy: a host that does not resolve and a port that is not
// ZooKeeper's end the session, naming them; an acquire whose deadline passes
// while disconnected says not_connected, never lock_timeout; a try is one
// look (not_connected at once while no server is connected); a request
// that no session carried waits for the connection.
#include <doctest/doctest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <algorithm>
#include <zkasio/election.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

#include "support/async.hpp"
#include "support/http_port.hpp"
#include "support/lock_test.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;

namespace {

// Every state the session goes through, from its start.
struct state_log {
  explicit state_log(session& s) : s(s) { follow(session_state::connecting); }
  void follow(session_state known) {
    s.async_wait_state_change(known, [this](zkasio::error_code ec, session_state next) {
      if (ec) return;
      seen.push_back(next);
      follow(next);
    });
  }
  bool ever(session_state state) const { return std::find(seen.begin(), seen.end(), state) != seen.end(); }
  session& s;
  std::vector<session_state> seen;
};

}  // namespace

TEST_CASE("a port that answers as no ZooKeeper server does ends the session, naming it; an acquire says so") {
  http_port http;
  asio::io_context io;
  session s(io, test_options(http.address()));
  state_log states(s);
  mutex m(s, "/not-zookeeper");
  run(io, [&]() -> awaitable<void> {
    auto [ec] = co_await s.async_connect(as_tuple(use_awaitable));
    CHECK(ec == error::not_zookeeper);
    CHECK(ec == condition::session_gone);
    CHECK(s.state() == session_state::closed);
    CHECK(s.failure().find(http.address()) != std::string::npos);
    CHECK(s.failure().find("540291120 ms") != std::string::npos);  // " 400" read as the negotiated timeout
    // Before: "connected", with a made-up session id, then no answer for ever.
    CHECK_FALSE(states.ever(session_state::connected));
    auto [acquire_ec, held] = co_await m.async_acquire_for(3s, as_tuple(use_awaitable));
    CHECK(acquire_ec == error::not_zookeeper);
    auto [read_ec, kids] = co_await s.async_get_children("/", as_tuple(use_awaitable));
    CHECK(read_ec == error::not_zookeeper);
  }());
  CHECK(http.connections() >= 1);
}

TEST_CASE("watches asked before the first connection complete when the port turns out not to be ZooKeeper's") {
  // Asked while connecting, they wait for the connection; the session then
  // ends for good (not_zookeeper), and each completes with that error. (Before:
  // the handle's close forgot them first, and none ever completed.)
  http_port http;
  asio::io_context io;
  session s(io, test_options(http.address()));
  std::vector<zkasio::error_code> outcomes;
  s.async_wait_deleted("/a", [&](zkasio::error_code ec) { outcomes.push_back(ec); });
  s.async_wait_data_changed("/b", [&](zkasio::error_code ec, event_type) { outcomes.push_back(ec); });
  s.async_wait_children_changed("/c", [&](zkasio::error_code ec, event_type) { outcomes.push_back(ec); });
  REQUIRE(run_until(io, [&] { return outcomes.size() == 3; }, 10s));
  for (auto& ec : outcomes) CHECK(ec == error::not_zookeeper);
  CHECK(s.state() == session_state::closed);
}

TEST_CASE("a host that does not resolve ends the session, naming it; another host of the string serves") {
  asio::io_context io;
  session s(io, test_options("no-such-host.invalid:2181"));
  run(io, [&]() -> awaitable<void> {
    auto [ec] = co_await s.async_connect(as_tuple(use_awaitable));
    CHECK(ec == error::unresolvable_host);  // before: session_closed, the cause in the log sink only
    CHECK(s.failure().find("'no-such-host.invalid'") != std::string::npos);
    mutex m(s, "/unresolvable");
    auto [try_ec, held] = co_await m.async_try_acquire(as_tuple(use_awaitable));
    CHECK(try_ec == error::unresolvable_host);
  }());
  // The C client skips a host that does not resolve when another does.
  session mixed(io, test_options("no-such-host.invalid:2181," + shared_hosts()));
  run(io, mixed.async_connect(use_awaitable));
  CHECK(mixed.failure().empty());
}

TEST_CASE("unreachable is not busy: a deadline passed while disconnected says not_connected, a busy lock lock_timeout") {
  SUBCASE("nothing listens: never connected") {
    asio::io_context io;
    session s(io, test_options("127.0.0.1:1"));
    mutex m(s, "/unreachable");
    shared_mutex rw(s, "/unreachable-rw");
    semaphore leases(s, "/unreachable-sem", 2);
    race_mutex race(s, "/unreachable-race");
    election e(s, "/unreachable-election");
    run(io, [&]() -> awaitable<void> {
      auto [ec, held] = co_await m.async_acquire_for(500ms, as_tuple(use_awaitable));
      CHECK(ec == error::not_connected);  // before: lock_timeout, as for a lock held by another
      CHECK(ec != error::lock_timeout);
      std::tie(ec, held) = co_await rw.async_acquire_shared_for(300ms, as_tuple(use_awaitable));
      CHECK(ec == error::not_connected);
      std::tie(ec, held) = co_await leases.async_acquire_for(300ms, as_tuple(use_awaitable));
      CHECK(ec == error::not_connected);
      std::tie(ec, held) = co_await race.async_acquire_for(300ms, as_tuple(use_awaitable));
      CHECK(ec == error::not_connected);
      auto [campaign_ec, leading] = co_await e.async_campaign_for("x", 300ms, as_tuple(use_awaitable));
      CHECK(campaign_ec == error::not_connected);
    }());
  }
  SUBCASE("an outage: connected before, cut off at the deadline; a busy lock: lock_timeout") {
    zk_servers server;
    tcp_proxy proxy(server.host(1));
    asio::io_context io;
    session holder(io, test_options(server.hosts(), 10s)), s(io, test_options(proxy.address(), 10s));
    auto path = unique_path("busy-or-unreachable");
    mutex mine(holder, path), theirs(s, path);
    run(io, [&]() -> awaitable<void> {
      auto held = co_await mine.async_acquire(use_awaitable);
      co_await s.async_connect(use_awaitable);
      auto [ec, none] = co_await theirs.async_acquire_for(300ms, as_tuple(use_awaitable));
      CHECK(ec == error::lock_timeout);  // connected, and the lock held by another
      proxy.refuse_connections(true);
      proxy.drop_now();
      REQUIRE(co_await eventually([&] { return s.state() == session_state::suspended; }));
      std::tie(ec, none) = co_await theirs.async_acquire_for(500ms, as_tuple(use_awaitable));
      CHECK(ec == error::not_connected);
      proxy.refuse_connections(false);
      co_await held.async_release(use_awaitable);
      CHECK(co_await settles_at(holder, path, 0));
    }(), 30s);
  }
}

// A try is one look: while no server is connected it fails at once (before:
// it waited for the connection, for ever against an unreachable server).
TEST_CASE("a try while no server is connected fails at once with not_connected, for every recipe") {
  zk_servers server;
  tcp_proxy proxy(server.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 10s)), observer(io, test_options(server.hosts(), 10s));
  auto path = unique_path("try-outage");
  mutex m(s, path + "/m");
  shared_mutex rw(s, path + "/rw");
  semaphore leases(s, path + "/sem", 2);
  race_mutex race(s, path + "/race");
  mutex handing(s, path + "/local", {.local_handoff = local_handoff_bound{}});
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await eventually([&] { return s.state() == session_state::suspended; }));
    auto started = std::chrono::steady_clock::now();
    auto [ec, held] = co_await m.async_try_acquire(as_tuple(use_awaitable));
    CHECK(ec == error::not_connected);
    std::tie(ec, held) = co_await rw.async_try_acquire(as_tuple(use_awaitable));
    CHECK(ec == error::not_connected);
    std::tie(ec, held) = co_await rw.async_try_acquire_shared(as_tuple(use_awaitable));
    CHECK(ec == error::not_connected);
    std::tie(ec, held) = co_await leases.async_try_acquire(as_tuple(use_awaitable));
    CHECK(ec == error::not_connected);
    std::tie(ec, held) = co_await race.async_try_acquire(as_tuple(use_awaitable));
    CHECK(ec == error::not_connected);
    std::tie(ec, held) = co_await handing.async_try_acquire(as_tuple(use_awaitable));
    CHECK(ec == error::not_connected);
    // At once: no wait for a connection (bounded loosely: a loaded machine).
    CHECK(std::chrono::steady_clock::now() - started < 2s);
    proxy.refuse_connections(false);
    // Nothing was made by them.
    CHECK(!(co_await observer.async_exists(path, use_awaitable)));
  }(), 30s);
}

// A request that no session carried cannot have been applied: it waits for
// the connection (before: the C client failed a write queued while it
// connected with connection_loss, and lock_server exited).
TEST_CASE("a write sent before the first connection waits for it; cancelled, it is never sent; closed, it fails") {
  zk_servers server;
  tcp_proxy proxy(server.host(1));
  asio::io_context io;
  proxy.refuse_connections(true);
  session s(io, test_options(proxy.address(), 10s)), observer(io, test_options(server.hosts(), 10s));
  auto path = unique_path("before-connection");
  run(io, [&]() -> awaitable<void> {
    std::optional<zkasio::error_code> created_ec, cancelled_ec;
    s.async_create(path, "waited", [&](zkasio::error_code ec, created) { created_ec = ec; });
    asio::cancellation_signal cancel;
    s.async_create(path + "-cancelled", "",
                   asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec, created) { cancelled_ec = ec; }));
    REQUIRE(co_await eventually([&] { return proxy.connections_accepted() >= 2; }));  // turned away
    CHECK_FALSE(created_ec.has_value());
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await eventually([&] { return cancelled_ec.has_value(); }));
    CHECK(*cancelled_ec == asio::error::operation_aborted);
    proxy.refuse_connections(false);
    REQUIRE(co_await eventually([&] { return created_ec.has_value(); }));
    CHECK(!*created_ec);
    CHECK((co_await observer.async_get_data(path, use_awaitable)).data == "waited");
    CHECK(!(co_await observer.async_exists(path + "-cancelled", use_awaitable)));
    co_await observer.async_remove(path, use_awaitable);
  }(), 30s);
  // A write waiting for the connection when the session is closed: session_closed.
  proxy.refuse_connections(true);
  session closing(io, test_options(proxy.address(), 10s));
  run(io, [&]() -> awaitable<void> {
    std::optional<zkasio::error_code> ec;
    closing.async_create(path + "-never", "", [&](zkasio::error_code e, created) { ec = e; });
    co_await closing.async_close(use_awaitable);
    REQUIRE(co_await eventually([&] { return ec.has_value(); }));
    CHECK(*ec == error::session_closed);
    CHECK(!(co_await observer.async_exists(path + "-never", use_awaitable)));
  }(), 30s);
}
