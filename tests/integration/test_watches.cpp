// Watches and cancellation against a real server: one-shot waits fire,
// share one server watch, and a cancelled wait leaves no watch behind
// (checked with the wchc four-letter word).
#include <doctest/doctest.h>
#include <unistd.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
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

// Paths the server holds watches on, for any session (wchc).
std::string watched(const std::string& hosts) {
  return four_letter_word(hosts.substr(0, hosts.find(',')), "wchc");
}

}  // namespace

TEST_CASE("waiting for deletion") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("watch-deleted");
  run(io, [&]() -> awaitable<void> {
    // A node that is not there: at once.
    co_await s.async_wait_deleted(path, use_awaitable);

    co_await s.async_create(path, "", use_awaitable);
    test_event fired(io.get_executor());
    s.async_wait_deleted(path, [&](zkasio::error_code ec) {
      CHECK(!ec);
      fired.count();
    });
    // A data change does not end a deletion wait.
    co_await other.async_set_data(path, "changed", use_awaitable);
    co_await other.async_get_data(path, use_awaitable);
    co_await s.async_exists(path, use_awaitable);  // the event has reached s by now
    CHECK_FALSE(fired.happened());
    co_await other.async_remove(path, use_awaitable);
    CHECK(co_await fired.wait());
  }());
}

TEST_CASE("waiting for data and children changes") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("watch-changes");
  run(io, [&]() -> awaitable<void> {
    zkasio::error_code ec;
    co_await s.async_wait_data_changed(path, asio::redirect_error(use_awaitable, ec));
    CHECK(ec == zk_error::no_node);
    auto made = co_await s.async_create(path, "", use_awaitable);

    // Known versions make the waits race-free against the concurrent change.
    auto data_change = s.async_wait_data_changed(path, made.stat.version, use_awaitable);
    auto set = [&]() -> awaitable<event_type> {
      co_await other.async_set_data(path, "x", use_awaitable);
      co_return event_type::data_changed;
    };
    auto [seen, _] = co_await (std::move(data_change) && set());
    CHECK(seen == event_type::data_changed);

    // A known version that is already stale: at once.
    CHECK(co_await s.async_wait_data_changed(path, made.stat.version, use_awaitable) ==
          event_type::data_changed);

    auto children_change = s.async_wait_children_changed(path, made.stat.cversion, use_awaitable);
    auto add = [&]() -> awaitable<event_type> {
      co_await other.async_create(path + "/kid", "", use_awaitable);
      co_return event_type::children_changed;
    };
    auto [kids, __] = co_await (std::move(children_change) && add());
    CHECK(kids == event_type::children_changed);
    CHECK(co_await s.async_wait_children_changed(path, 0, use_awaitable) ==
          event_type::children_changed);

    // Deletion ends a data wait too.
    co_await other.async_remove(path + "/kid", use_awaitable);
    auto deletion = s.async_wait_data_changed(path, made.stat.version + 1, use_awaitable);
    auto remove = [&]() -> awaitable<event_type> {
      co_await other.async_remove(path, use_awaitable);
      co_return event_type::deleted;
    };
    auto [gone, ___] = co_await (std::move(deletion) && remove());
    CHECK(gone == event_type::deleted);
    // A missing node with a known version: it changed (it went away).
    CHECK(co_await s.async_wait_data_changed(path, 1, use_awaitable) == event_type::deleted);
  }());
}

TEST_CASE("many waiters on one path share one server watch and all wake") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("watch-shared");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", use_awaitable);
    test_event woken(io.get_executor(), 50);
    for (int i = 0; i < 50; ++i)
      s.async_wait_deleted(path, [&](zkasio::error_code ec) {
        if (!ec) woken.count();
      });
    co_await s.async_exists(path, use_awaitable);
    auto listing = watched(shared_hosts());
    std::size_t count = 0;
    for (auto at = listing.find(path); at != std::string::npos; at = listing.find(path, at + 1))
      ++count;
    CHECK(count == 1);
    co_await other.async_remove(path, use_awaitable);
    CHECK(co_await woken.wait());
  }());
}

TEST_CASE("a cancelled wait completes with operation_aborted and leaves no watch") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("watch-cancelled");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", use_awaitable);
    co_await s.async_create(path + "/c", "", use_awaitable);

    SUBCASE("by awaitable operators") {
      asio::steady_timer timer(io, 50ms);
      auto result = co_await (s.async_wait_deleted(path, use_awaitable) ||
                              timer.async_wait(use_awaitable));
      CHECK(result.index() == 1);
    }
    SUBCASE("by each cancellation type") {
      for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                        asio::cancellation_type::total}) {
        asio::cancellation_signal signal;
        std::optional<zkasio::error_code> data_ec, kids_ec;
        test_event both(io.get_executor(), 2);
        s.async_wait_data_changed(path, asio::bind_cancellation_slot(
                                            signal.slot(), [&](zkasio::error_code ec, event_type) {
                                              data_ec = ec;
                                              both.count();
                                            }));
        co_await s.async_exists(path, use_awaitable);  // the watch is set
        signal.emit(type);
        asio::cancellation_signal signal2;
        s.async_wait_children_changed(
            path, asio::bind_cancellation_slot(signal2.slot(), [&](zkasio::error_code ec, event_type) {
              kids_ec = ec;
              both.count();
            }));
        signal2.emit(type);  // before the watch request is even answered
        CHECK(co_await both.wait());
        REQUIRE(data_ec.has_value());
        REQUIRE(kids_ec.has_value());
        CHECK(*data_ec == asio::error::operation_aborted);
        CHECK(*kids_ec == asio::error::operation_aborted);
      }
    }
    // Requests run in order: once this is answered, the removal was done.
    co_await s.async_exists(path, use_awaitable);
    CHECK(watched(shared_hosts()).find(path) == std::string::npos);

    // A later change calls nobody twice, and a new wait still works.
    test_event calls(io.get_executor());
    s.async_wait_deleted(path + "/c", [&](zkasio::error_code) { calls.count(); });
    co_await other.async_remove(path + "/c", use_awaitable);
    CHECK(co_await calls.wait());
    co_await other.async_set_data(path, "after", use_awaitable);
    co_await s.async_remove(path, use_awaitable);
    CHECK(calls.counted() == 1);
  }());
}

TEST_CASE("cancelling one waiter keeps the watch for the others") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("watch-others");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", use_awaitable);
    asio::cancellation_signal signal;
    std::optional<zkasio::error_code> cancelled, kept;
    test_event kept_fired(io.get_executor());
    s.async_wait_deleted(path, asio::bind_cancellation_slot(
                                   signal.slot(), [&](zkasio::error_code ec) { cancelled = ec; }));
    s.async_wait_deleted(path, [&](zkasio::error_code ec) {
      kept = ec;
      kept_fired.count();
    });
    co_await s.async_exists(path, use_awaitable);
    signal.emit(asio::cancellation_type::terminal);
    co_await s.async_exists(path, use_awaitable);
    CHECK(watched(shared_hosts()).find(path) != std::string::npos);
    co_await other.async_remove(path, use_awaitable);
    CHECK(co_await kept_fired.wait());
    REQUIRE(cancelled.has_value());
    CHECK(*cancelled == asio::error::operation_aborted);
    REQUIRE(kept.has_value());
    CHECK(!*kept);
  }());
}

TEST_CASE("waiting for a node to be created: at once if it exists, else at its creation; cancelled, no watch is left") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("watch-created");
  run(io, [&]() -> awaitable<void> {
    // Missing: it waits, beside a deletion waiter on the same path (which
    // completes at once: the node is not there).
    std::optional<zkasio::error_code> created, deleted;
    test_event came(io.get_executor());
    s.async_wait_created(path, [&](zkasio::error_code ec) {
      created = ec;
      came.count();
    });
    s.async_wait_deleted(path, [&](zkasio::error_code ec) { deleted = ec; });
    co_await s.async_exists("/", use_awaitable);  // (the watch is set: requests run in order)
    CHECK_FALSE(created.has_value());
    REQUIRE(deleted.has_value());
    CHECK(!*deleted);
    CHECK(watched(shared_hosts()).find(path) != std::string::npos);
    co_await other.async_create(path, "", use_awaitable);
    REQUIRE(co_await came.wait());
    CHECK(!*created);
    // There already: at once, and no watch is left.
    co_await s.async_wait_created(path, use_awaitable);
    co_await s.async_exists("/", use_awaitable);
    CHECK(watched(shared_hosts()).find(path) == std::string::npos);
    // Cancelled (each type: a wait has no effect to undo): no watch is left.
    auto absent = path + "-absent";
    for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                      asio::cancellation_type::total}) {
      asio::cancellation_signal signal;
      std::optional<zkasio::error_code> cancelled;
      s.async_wait_created(absent, asio::bind_cancellation_slot(signal.slot(), [&](zkasio::error_code ec) {
                             cancelled = ec;
                           }));
      co_await s.async_exists("/", use_awaitable);
      signal.emit(type);
      REQUIRE(co_await eventually([&] { return cancelled.has_value(); }));
      CHECK(*cancelled == asio::error::operation_aborted);
    }
    co_await s.async_exists("/", use_awaitable);  // the removal was answered before this
    CHECK(watched(shared_hosts()).find(absent) == std::string::npos);
    co_await other.async_remove(path, use_awaitable);
  }());
}

TEST_CASE("a pending watch across a disconnection fires after it; across an expiry it fails with session_expired") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 2s));
  session other(io, test_options(servers.hosts(), 10s));
  auto path = unique_path("watch-across");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    std::optional<zkasio::error_code> created, deleted;
    test_event came(io.get_executor()), gone(io.get_executor());
    s.async_wait_created(path, [&](zkasio::error_code ec) {
      created = ec;
      came.count();
    });
    co_await s.async_exists("/", use_awaitable);
    // Created while this session was cut off (the session lives): told once
    // it reconnects (the watch is set again on the new connection).
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await eventually([&] { return s.state() == session_state::suspended; }));
    co_await other.async_create(path, "", use_awaitable);
    CHECK_FALSE(came.happened());
    proxy.refuse_connections(false);
    REQUIRE(co_await came.wait());
    CHECK(!*created);
    // Deleted only after the session expired: the wait fails.
    s.async_wait_deleted(path, [&](zkasio::error_code ec) {
      deleted = ec;
      gone.count();
    });
    co_await s.async_create(path + "-mine", "", create_options(create_mode::ephemeral), use_awaitable);
    auto generation = s.generation();
    proxy.refuse_connections(true);
    proxy.drop_now();
    co_await other.async_wait_deleted(path + "-mine", use_awaitable);  // the server expired the session
    CHECK_FALSE(gone.happened());  // (the client cannot know yet)
    proxy.refuse_connections(false);
    REQUIRE(co_await gone.wait(15s));  // failed once the client learnt of the expiry
    CHECK(*deleted == zk_error::session_expired);
    CHECK(s.generation() != generation);
    CHECK(co_await other.async_exists(path, use_awaitable));  // it was never deleted
    co_await other.async_remove(path, use_awaitable);
  }(), 40s);
}
