// zkasio::session against a real server: operations, errors, bad input and
// close. (Every completion token, and the cases on several threads:
// test_session_threads.)
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <algorithm>
#include <asio/detached.hpp>
#include <zkasio/session.hpp>

#include "support/async.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using asio::awaitable;
using asio::use_awaitable;

TEST_CASE("a session connects and reports its state, id and timeout") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  run(io, s.async_connect(use_awaitable));
  CHECK(s.state() == session_state::connected);
  CHECK(s.id() != 0);
  CHECK(s.negotiated_timeout() >= 400ms);
  CHECK(s.last_contact() <= std::chrono::steady_clock::now());
  CHECK(s.generation() == 0);
  run(io, s.async_close(use_awaitable));
  CHECK(s.state() == session_state::closed);
  CHECK(std::string(to_string(s.state())) == "closed");
  CHECK(std::string(to_string(session_state::suspended)) == "suspended");
}

TEST_CASE("create, read, update and delete a node") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("session-crud");
  run(io, [&]() -> awaitable<void> {
    auto made = co_await s.async_create(path, "one", use_awaitable);
    CHECK(made.path == path);
    CHECK(made.stat.czxid > 0);
    CHECK(made.stat.version == 0);

    auto got = co_await s.async_get_data(path, use_awaitable);
    CHECK(got.data == "one");
    CHECK(got.stat == made.stat);

    auto st = co_await s.async_set_data(path, "two", 0, use_awaitable);
    CHECK(st.version == 1);
    CHECK((co_await s.async_get_data(path, use_awaitable)).data == "two");

    auto seen = co_await s.async_exists(path, use_awaitable);
    REQUIRE(seen.has_value());
    CHECK(seen->version == 1);

    co_await s.async_create(path + "/b", "", use_awaitable);
    co_await s.async_create(path + "/a", "", use_awaitable);
    auto kids = co_await s.async_get_children(path, use_awaitable);
    std::sort(kids.names.begin(), kids.names.end());
    CHECK(kids.names == std::vector<std::string>{"a", "b"});
    CHECK(kids.stat.num_children == 2);

    co_await s.async_remove(path + "/a", use_awaitable);
    co_await s.async_remove(path + "/b", 0, use_awaitable);
    co_await s.async_remove(path, use_awaitable);
    CHECK_FALSE((co_await s.async_exists(path, use_awaitable)).has_value());
  }());
}

TEST_CASE("create modes: ephemeral, sequential, container, ACL") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto dir = unique_path("session-modes");
  run(io, [&]() -> awaitable<void> {
    // Options are named before co_await: g++ 12 destroys a braced temporary
    // in a co_await expression twice.
    const create_options ephemeral{create_mode::ephemeral};
    const create_options persistent_sequential{create_mode::persistent_sequential};
    const create_options ephemeral_sequential{create_mode::ephemeral_sequential};
    const create_options container{create_mode::container};
    const create_options creator_only{create_mode::persistent, creator_all_acl()};
    co_await s.async_create(dir, "", use_awaitable);
    auto e = co_await s.async_create(dir + "/e", "", ephemeral, use_awaitable);
    CHECK(e.stat.ephemeral_owner == s.id());
    auto q1 = co_await s.async_create(dir + "/q-", "", persistent_sequential, use_awaitable);
    auto q2 = co_await s.async_create(dir + "/q-", "", ephemeral_sequential, use_awaitable);
    CHECK(q1.path.size() == (dir + "/q-").size() + 10);
    CHECK(q1.path < q2.path);
    // A sequential create may end in '/': the server appends the number.
    auto slash = co_await s.async_create(dir + "/", "", persistent_sequential, use_awaitable);
    CHECK(slash.path.size() == dir.size() + 11);
    co_await s.async_remove(slash.path, use_awaitable);

    auto c = co_await s.async_create(dir + "/container", "", container, use_awaitable);
    CHECK(c.path == dir + "/container");

    // The creator's ACL: only an authenticated creator may read.
    co_await s.async_add_auth("digest", "alice:secret", use_awaitable);
    co_await s.async_create(dir + "/private", "x", creator_only, use_awaitable);
    CHECK((co_await s.async_get_data(dir + "/private", use_awaitable)).data == "x");
    CHECK(co_await error_of([&](auto t) { return other.async_get_data(dir + "/private", t); }) ==
          zk_error::no_auth);
    co_await s.async_remove(dir + "/private", use_awaitable);

    co_await s.async_close(use_awaitable);
    // The ephemeral nodes went with the session.
    CHECK_FALSE((co_await other.async_exists(dir + "/e", use_awaitable)).has_value());
    CHECK_FALSE((co_await other.async_exists(q2.path, use_awaitable)).has_value());
    CHECK((co_await other.async_exists(q1.path, use_awaitable)).has_value());
  }());
}

TEST_CASE("the server's errors in normal use") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("session-errors");
  run(io, [&]() -> awaitable<void> {
    CHECK(co_await error_of([&](auto t) { return s.async_get_data(path, t); }) == zk_error::no_node);
    CHECK(co_await error_of([&](auto t) { return s.async_remove(path, t); }) == zk_error::no_node);
    CHECK(co_await error_of([&](auto t) { return s.async_create(path + "/x/y", "", t); }) ==
          zk_error::no_node);
    co_await s.async_create(path, "", use_awaitable);
    CHECK(co_await error_of([&](auto t) { return s.async_create(path, "", t); }) ==
          zk_error::node_exists);
    CHECK(co_await error_of([&](auto t) { return s.async_set_data(path, "", 7, t); }) ==
          zk_error::bad_version);
    CHECK(co_await error_of([&](auto t) { return s.async_remove(path, 3, t); }) ==
          zk_error::bad_version);
    co_await s.async_create(path + "/child", "", use_awaitable);
    CHECK(co_await error_of([&](auto t) { return s.async_remove(path, t); }) == zk_error::not_empty);
    const create_options ephemeral{create_mode::ephemeral};
    co_await s.async_create(path + "/eph", "", ephemeral, use_awaitable);
    CHECK(co_await error_of([&](auto t) { return s.async_create(path + "/eph/x", "", t); }) ==
          zk_error::no_children_for_ephemerals);
    CHECK(co_await error_of([&](auto t) {
            return s.async_create(path + "/bad-acl", "", {create_mode::persistent, acl{}}, t);
          }) == zk_error::invalid_acl);
    CHECK(co_await error_of([&](auto t) {
            return s.async_create(path + "/bad-acl", "",
                                  {create_mode::persistent, {{perm::all, "nonsense", "x"}}}, t);
          }) == zk_error::invalid_acl);
    CHECK(co_await error_of([&](auto t) { return s.async_add_auth("", "x", t); }) ==
          zk_error::bad_arguments);
  }());
}

TEST_CASE("bad input is refused before anything is sent, with the path named") {
  asio::io_context io;
  std::vector<std::string> logged;
  auto o = test_options(shared_hosts());
  o.log = [&](std::string_view line) { logged.emplace_back(line); };
  session s(io, o);
  const std::string bad_paths[] = {"",     "a/b",   "/a/",     "/a//b", "/a/./b", "/a/../b",
                                   "/..",  "/a\nb", std::string("/a\0b", 4), "/a\x7f",
                                   "/a\xc2\x85", "/" + std::string(max_path_length, 'x')};
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    for (const auto& p : bad_paths) {
      CAPTURE(p);
      logged.clear();
      CHECK(co_await error_of([&](auto t) { return s.async_get_data(p, t); }) ==
            error::invalid_path);
      CHECK(co_await error_of([&](auto t) { return s.async_create(p, "", t); }) ==
            error::invalid_path);
      CHECK(co_await error_of([&](auto t) { return s.async_wait_deleted(p, t); }) ==
            error::invalid_path);
      REQUIRE(!logged.empty());
      CHECK(logged.front().find("invalid path '") == 0);
    }
    CHECK(path_problem("/a//b") == "invalid path '/a//b': has an empty component ('//')");
    CHECK(path_problem("/ok/path").empty());
    CHECK(path_problem("/").empty());

    // Over jute.maxbuffer: refused before sending (the server would drop the
    // connection), alone or counted whole in a multi.
    auto path = unique_path("session-big");
    std::string big(0xfffff, 'x');
    CHECK(co_await error_of([&](auto t) { return s.async_create(path, big, t); }) ==
          error::request_too_large);
    std::string half(0x80000, 'x');
    CHECK(co_await error_of([&](auto t) {
            return s.async_multi({op::create{path, half}, op::create{path + "-2", half}}, t);
          }) == error::request_too_large);
    CHECK(co_await error_of([&](auto t) { return s.async_multi({}, t); }) == zk_error::bad_arguments);
    // Nothing was lost: the session still works and nothing was created.
    CHECK(s.state() == session_state::connected);
    CHECK_FALSE((co_await s.async_exists(path, use_awaitable)).has_value());
    co_await s.async_create(path, std::string(1000, 'y'), use_awaitable);
    co_await s.async_remove(path, use_awaitable);
  }());
}

TEST_CASE("multi applies all operations or none") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("session-multi");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", use_awaitable);
    // (Vectors built before co_await: g++ 12 cannot keep an initializer list across one.)
    std::vector<multi_op> ops{op::check{path, 0}, op::create{path + "/a", "1"},
                              op::set_data{path, "new"},
                              op::create{path + "/s-", "", {create_mode::persistent_sequential}}};
    auto results = co_await s.async_multi(std::move(ops), use_awaitable);
    REQUIRE(results.size() == 4);
    CHECK(results[1].path == path + "/a");
    CHECK(results[2].stat.version == 1);
    CHECK(results[3].path.rfind(path + "/s-", 0) == 0);
    for (auto& r : results) CHECK(!r.error);

    // A failing check: nothing applied, the failing operation named.
    zkasio::error_code ec;
    std::vector<multi_op> failing{op::remove{path + "/a"}, op::check{path, 0}};
    results = co_await s.async_multi(std::move(failing), asio::redirect_error(use_awaitable, ec));
    CHECK(ec == zk_error::bad_version);
    REQUIRE(results.size() == 2);
    CHECK(results[1].error == zk_error::bad_version);
    CHECK((co_await s.async_exists(path + "/a", use_awaitable)).has_value());
  }());
}

TEST_CASE("1,000 concurrent operations from one coroutine") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("session-many");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", use_awaitable);
    int completed = 0, failed = 0;
    for (int i = 0; i < 1000; ++i)
      s.async_create(path + "/n", "", {create_mode::persistent_sequential},
                     [&](zkasio::error_code ec, created) { ++(ec ? failed : completed); });
    auto kids = co_await s.async_get_children(path, use_awaitable);
    // Requests are executed in order: the listing comes after every create.
    CHECK(kids.names.size() == 1000);
    CHECK(completed + failed == 1000);
    CHECK(failed == 0);
    std::vector<multi_op> removes;
    for (auto& n : kids.names) removes.push_back(op::remove{path + "/" + n});
    co_await s.async_multi(std::move(removes), use_awaitable);
    co_await s.async_remove(path, use_awaitable);
  }());
}

TEST_CASE("closing: pending and later operations fail with session_closed") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("session-closing");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", use_awaitable);
    std::optional<zkasio::error_code> waited;
    s.async_wait_deleted(path, [&](zkasio::error_code ec) { waited = ec; });
    co_await s.async_close(use_awaitable);
    CHECK(s.state() == session_state::closed);
    CHECK(co_await error_of([&](auto t) { return s.async_get_data(path, t); }) ==
          error::session_closed);
    CHECK(co_await error_of([&](auto t) { return s.async_connect(t); }) == error::session_closed);
    co_await s.async_close(use_awaitable);  // closing twice is harmless
    asio::steady_timer settle(io, 0ms);
    co_await settle.async_wait(use_awaitable);
    REQUIRE(waited.has_value());
    CHECK(*waited == error::session_closed);
    CHECK(*waited == condition::session_gone);
  }());
  session cleanup(io, test_options(shared_hosts()));
  run(io, cleanup.async_remove(path, use_awaitable));
}

TEST_CASE("with_session: the body's result or exception once the session is closed, and run() returns by itself") {
  // Nothing but the session keeps each io_context's run() going: run_for
  // returns before its bound only when the work is done (stopped()).
  auto path = unique_path("with-session");
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address()));
  std::exception_ptr failure;
  bool finished = false;
  auto report = [&](std::exception_ptr e, auto...) {
    failure = e;
    finished = true;
  };
  SUBCASE("a result") {
    std::string got;
    asio::co_spawn(io, with_session(s, [&](session& zk) -> awaitable<std::string> {
                     co_await zk.async_create(path, "made", create_options(create_mode::ephemeral), use_awaitable);
                     co_return (co_await zk.async_get_data(path, use_awaitable)).data;
                   }),
                   [&](std::exception_ptr e, std::string data) {
                     got = data;
                     report(e);
                   });
    io.run_for(20s);
    REQUIRE(io.stopped());
    CHECK(finished);
    CHECK(!failure);
    CHECK(got == "made");
    // Closed, not merely abandoned: the ephemeral node went with the session.
    asio::io_context check_io;
    session observer(check_io, test_options(servers.hosts()));
    run(check_io, [&]() -> awaitable<void> {
      CHECK_FALSE((co_await observer.async_exists(path, use_awaitable)).has_value());
      co_await observer.async_close(use_awaitable);
    }());
  }
  SUBCASE("an exception") {
    asio::co_spawn(io, with_session(s, [](session& zk) -> awaitable<void> {
                     co_await zk.async_connect(use_awaitable);
                     throw std::runtime_error("the body failed");
                   }),
                   report);
    io.run_for(20s);
    REQUIRE(io.stopped());
    REQUIRE(failure);
    CHECK_THROWS_WITH(std::rethrow_exception(failure), "the body failed");
  }
  SUBCASE("cancelled, again and again") {
    // Cancelled every millisecond from the time the body waits until the end:
    // the body ends at the first, and none cuts the close short, though the
    // close waits (its probe's answer is held: it gives up on it after its
    // patience, a second, and shuts the connection).
    asio::cancellation_signal cancel;
    bool waiting = false, closed_at_completion = false;
    asio::co_spawn(io, with_session(s, [&](session& zk) -> awaitable<void> {
                     co_await zk.async_connect(use_awaitable);
                     waiting = true;
                     asio::steady_timer forever(io, asio::steady_timer::time_point::max());
                     co_await forever.async_wait(use_awaitable);
                   }),
                   asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
                     closed_at_completion = s.state() == session_state::closed;
                     report(e);
                   }));
    asio::co_spawn(io, [&]() -> awaitable<void> {
      asio::steady_timer tick(io);
      while (!finished) {
        if (waiting) {
          proxy.hold_replies();
          cancel.emit(asio::cancellation_type::terminal);
        }
        tick.expires_after(1ms);
        co_await tick.async_wait(use_awaitable);
      }
    }, asio::detached);
    io.run_for(20s);
    REQUIRE(io.stopped());
    CHECK(closed_at_completion);
    REQUIRE(failure);
    try {
      std::rethrow_exception(failure);
    } catch (const zkasio::system_error& e) {
      CHECK(e.code() == asio::error::operation_aborted);
    }
  }
  SUBCASE("awaited by a coroutine, which is cancellable again afterwards") {
    asio::cancellation_signal cancel;
    bool returned = false;
    asio::co_spawn(io, [&]() -> awaitable<void> {
      co_await with_session(s, [](session& zk) -> awaitable<void> { co_await zk.async_connect(use_awaitable); });
      returned = true;
      asio::steady_timer forever(io, asio::steady_timer::time_point::max());
      co_await forever.async_wait(use_awaitable);
    }, asio::bind_cancellation_slot(cancel.slot(), report));
    asio::co_spawn(io, [&]() -> awaitable<void> {
      asio::steady_timer tick(io);
      while (!returned) {
        tick.expires_after(1ms);
        co_await tick.async_wait(use_awaitable);
      }
      cancel.emit(asio::cancellation_type::terminal);
    }, asio::detached);
    io.run_for(20s);
    REQUIRE(io.stopped());  // the caller's wait was cancelled
    CHECK(returned);
    REQUIRE(failure);
    CHECK_THROWS_AS(std::rethrow_exception(failure), zkasio::system_error);
  }
  CHECK(s.state() == session_state::closed);
}

TEST_CASE("nothing is printed by default; a log sink receives the C client's lines") {
  // Capture stderr while sessions connect, fail to connect and close.
  char name[] = "/tmp/zkasio-stderr-XXXXXX";
  int capture = mkstemp(name);
  REQUIRE(capture >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(capture, 2);

  asio::io_context io;
  std::vector<std::string> lines;
  auto logged = test_options("127.0.0.1:1");
  logged.log = [&](std::string_view line) { lines.emplace_back(line); };
  {
    session quiet(io, test_options("127.0.0.1:1"));  // nothing listens there
    session loud(io, logged);
    session fine(io, test_options(shared_hosts()));
    run(io, [&]() -> awaitable<void> {
      co_await fine.async_connect(use_awaitable);
      // The C client logs every refused connection attempt.
      asio::steady_timer window(io, 1s);
      co_await window.async_wait(use_awaitable);
      co_await quiet.async_close(use_awaitable);
      co_await loud.async_close(use_awaitable);
      co_await fine.async_close(use_awaitable);
    }());
  }
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  auto size = lseek(capture, 0, SEEK_END);
  close(capture);
  unlink(name);
  CHECK(size == 0);
  CHECK(!lines.empty());  // the same events, logged where asked
  // Lines without their newline, the closing one ("Freeing zookeeper resources") too.
  CHECK(std::ranges::any_of(lines, [](auto& line) { return line.find("Freeing zookeeper resources") != line.npos; }));
  for (auto& line : lines) {
    CAPTURE(line);
    CHECK((line.empty() || line.back() != '\n'));
  }
}
