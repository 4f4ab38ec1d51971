// zkasio::mutex against a real server: exclusion, order, no herd,
// cancellation leaving nothing behind, reentrancy, lost locks.
#include <doctest/doctest.h>
#include <zookeeper/proto.h>

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <sstream>
#include <zkasio/hold_node.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>

#include "recipes/rules/lock_queue.hpp"
#include "support/async.hpp"
#include "support/lock_test.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;

TEST_CASE("an uncontended acquire: a Curator-named node, a fencing token, nothing left after") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-basic") + "/deep/lock";
  mutex m(s, path, {.data = "me:1"});
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    CHECK(first.held());
    auto name = first.node().substr(path.size() + 1);
    auto parsed = zkasio::detail::parse_lock_node(name);
    REQUIRE(parsed.has_value());
    CHECK(first.fencing_token().czxid > 0);
    auto contenders = co_await m.async_contenders(use_awaitable);
    REQUIRE(contenders.size() == 1);
    CHECK(contenders[0].node == first.node());  // a full path, as the lock's
    CHECK(contenders[0].data == "me:1");
    auto token = first.fencing_token();
    co_await first.async_release(use_awaitable);
    CHECK_FALSE(first.held());
    CHECK((co_await lock_nodes(s, path)).empty());
    // The parents are containers: the server reclaims them once empty.
    auto parent = co_await s.async_exists(path, use_awaitable);
    REQUIRE(parent.has_value());
    // Without a token: zkasio::default_token.
    auto second = co_await m.async_acquire();
    CHECK(second.fencing_token() > token);
    co_await second.async_release();

    // A mutex made for one request: its lock outlives it, and releases.
    lock third;
    {
      mutex per_request(s, path);
      third = co_await per_request.async_acquire();
    }
    CHECK(third.held());
    CHECK((co_await lock_nodes(s, path)).size() == 1);
    co_await third.async_release();
    CHECK((co_await lock_nodes(s, path)).empty());
  }());
}

TEST_CASE("a mutex moved into a container is the same lock: its holder's reentrancy and release go with it") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-moved");
  std::vector<mutex> locks;
  locks.emplace_back(s, path);
  owner me;
  run(io, [&]() -> awaitable<void> {
    auto held = co_await locks[0].async_acquire({.who = me}, use_awaitable);
    mutex moved(std::move(locks[0]));
    locks.clear();
    auto again = co_await moved.async_acquire({.who = me}, use_awaitable);  // reentrant: the same lock object
    CHECK(again.node() == held.node());
    CHECK((co_await moved.async_contenders(use_awaitable)).size() == 1);
    co_await again.async_release(use_awaitable);
    co_await held.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));
  }());
}

TEST_CASE("an observer hears each acquire and each grant: acquiring, then granted or failed; lost; released") {
  using kind = lock_event::kind;
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-observer");
  struct heard {
    kind what;
    std::string node;
    std::chrono::steady_clock::duration took;
    zkasio::error_code error;
  };
  std::vector<heard> events;
  bool on_strand = true, path_right = true;
  std::optional<mutex> m;
  m.emplace(s, path, lock_options{.observer = [&](const lock_event& e) {
              on_strand = on_strand && m->get_executor().target<asio::strand<asio::io_context::executor_type>>()
                                           ->running_in_this_thread();
              path_right = path_right && e.path == path;
              events.push_back({e.what, std::string(e.node), e.took, e.error});
            }});
  mutex other(s, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m->async_acquire(use_awaitable);
    auto [timed_out, none] = co_await m->async_acquire_for(50ms, as_tuple(use_awaitable));
    CHECK(timed_out == error::lock_timeout);
    asio::steady_timer pause(io, 20ms);
    co_await pause.async_wait(use_awaitable);
    co_await other.async_revoke(held.node(), use_awaitable);
    co_await held.async_wait_lost(use_awaitable);
    auto node = held.node();
    auto [released] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK(released == error::lock_lost);
    {
      auto again = co_await m->async_acquire(use_awaitable);  // released by its destructor
    }
    CHECK(co_await settles_at(s, path, 0));
    const std::vector<kind> expected{kind::acquiring, kind::granted, kind::acquiring, kind::failed, kind::lost,
                                     kind::released,  kind::acquiring, kind::granted, kind::released};
    REQUIRE(events.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      CHECK(events[i].what == expected[i]);
    }
    CHECK(events[1].node == node);
    CHECK(events[3].error == error::lock_timeout);
    CHECK(events[3].took >= 50ms);                     // the acquire's wait
    CHECK(events[4].node == node);
    CHECK(events[4].took >= 20ms);                     // held until the loss
    CHECK(events[5].took >= events[4].took);           // held until the release
    CHECK(events[7].node == events[8].node);
  }());
  CHECK(on_strand);
  CHECK(path_right);
}

TEST_CASE("mutual exclusion: 200 coroutines over 8 sessions") {
  asio::io_context io;
  objects_over_sessions<mutex> mutexes(io, "mutex-exclusion", 8);
  // 10,000 grants (2,000 under a sanitizer: ASan's 10,000 once took 200 s
  // on a loaded machine): the chaos suite and the benchmark go on for
  // longer; a test's work stays bounded.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int contenders = 200, rounds = 10;
#else
  constexpr int contenders = 200, rounds = 50;
#endif
  int holding = 0, overlaps = 0, grants = 0;
  std::vector<std::int64_t> tokens;
  auto contender = [&](mutex& m) -> awaitable<void> {
    for (int i = 0; i < rounds; ++i) {
      auto l = co_await m.async_acquire(use_awaitable);
      if (++holding > 1) ++overlaps;
      tokens.push_back(l.fencing_token().czxid);
      ++grants;
      --holding;
      co_await l.async_release(use_awaitable);
    }
  };
  CHECK(run_coroutines(io, contenders, [&](int i) { return contender(mutexes[i]); }, 200s) == 0);
  CHECK(overlaps == 0);
  CHECK(grants == contenders * rounds);
  // Fencing tokens grow with every grant.
  CHECK(std::is_sorted(tokens.begin(), tokens.end()));
  CHECK(std::set<std::int64_t>(tokens.begin(), tokens.end()).size() == tokens.size());
  run(io, [&]() -> awaitable<void> { CHECK((co_await lock_nodes(mutexes.first_session(), mutexes.path)).empty()); }());
}

TEST_CASE("grants follow the order of the nodes; each of 50 waiters watches only its predecessor (CURATOR-716)") {
  constexpr int waiters = 50;
  asio::io_context io;
  auto path = unique_path("mutex-fifo");
  std::vector<std::unique_ptr<session>> sessions;
  std::vector<std::unique_ptr<mutex>> mutexes;
  for (int i = 0; i <= waiters; ++i) {
    sessions.push_back(std::make_unique<session>(io, test_options(shared_hosts(), 10s)));
    mutexes.push_back(std::make_unique<mutex>(*sessions.back(), path));
  }
  std::vector<std::string> granted_nodes;
  std::vector<lock> held(waiters + 1);
  run(io, [&]() -> awaitable<void> {
    held[0] = co_await mutexes[0]->async_acquire(use_awaitable);
    for (int i = 1; i <= waiters; ++i) {
      asio::co_spawn(io, [&, i]() -> awaitable<void> {
        auto l = co_await mutexes[i]->async_acquire(use_awaitable);
        granted_nodes.push_back(l.node());
        co_await l.async_release(use_awaitable);
      }, asio::detached);
      // Queue them one by one: each create lands after the previous.
      CHECK(co_await settles_at(*sessions[0], path, static_cast<std::size_t>(i + 1)));
    }
    auto queue = co_await lock_nodes(*sessions[0], path);
    REQUIRE(queue.size() == waiters + 1);
    co_await sessions[0]->async_exists("/", use_awaitable);

    // No herd: every lock node is watched by at most one waiter's session
    // (its successor) besides its owner's own (the holder's monitor, or a
    // waiter's watch on its own node), so a release notifies exactly one
    // waiter.
    auto watches = four_letter_word(shared_hosts(), "wchp");
    std::map<std::string, int> watchers;
    std::string current;
    std::istringstream lines(watches);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line[0] == '/') current = line;
      else if (!line.empty() && current.rfind(path + "/", 0) == 0) ++watchers[current];
    }
    for (std::size_t i = 0; i + 1 < queue.size(); ++i) {
      CAPTURE(i);
      // The successor's wait, plus its owner's own watch.
      CHECK(watchers[path + "/" + queue[i]] <= 2);
    }

    co_await held[0].async_release(use_awaitable);
    CHECK(co_await settles_at(*sessions[0], path, 0));
    std::vector<std::string> expected;
    for (std::size_t i = 1; i < queue.size(); ++i) expected.push_back(path + "/" + queue[i]);
    CHECK(granted_nodes == expected);
  }());
}

TEST_CASE("many waiters over two sessions, one leaving from the middle: grants stay in order") {
  asio::io_context io;
  session s(io, test_options(shared_hosts())), other(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-own");
  mutex m(s, path), foreign(other, path);
  std::vector<std::string> granted;
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    auto contend = [&](mutex& on, std::string name, asio::cancellation_slot slot) {
      asio::co_spawn(io, [&on, &granted, name]() -> awaitable<void> {
        auto [ec, l] = co_await on.async_acquire(as_tuple(use_awaitable));
        if (ec) co_return;
        granted.push_back(name);
        co_await l.async_release(use_awaitable);
      }, asio::bind_cancellation_slot(slot, asio::detached));
    };
    // Queue: first (held), b, x (another session's), c, d.
    asio::cancellation_signal cancel_b;
    std::size_t queued = 1;
    for (auto [on, name] : {std::pair{&m, "b"}, {&foreign, "x"}, {&m, "c"}, {&m, "d"}}) {
      contend(*on, name, std::string(name) == "b" ? cancel_b.slot() : asio::cancellation_slot());
      CHECK(co_await settles_at(s, path, ++queued));
    }
    // b leaves from the middle: x waits on first now; c and d keep waiting.
    cancel_b.emit(asio::cancellation_type::terminal);
    CHECK(co_await settles_at(s, path, 4));
    co_await first.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));
    CHECK(granted == std::vector<std::string>{"x", "c", "d"});
  }());
}

TEST_CASE("cancellation and timeouts at every stage leave no node behind (CURATOR-79)") {
  asio::io_context io;
  session holder_session(io, test_options(shared_hosts()));
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-cancel");
  mutex holder_mutex(holder_session, path);
  mutex m(s, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await holder_mutex.async_acquire(use_awaitable);

    // Before the create's reply: cancelled at once.
    {
      asio::cancellation_signal signal;
      std::optional<zkasio::error_code> result;
      m.async_acquire(asio::bind_cancellation_slot(signal.slot(), [&](zkasio::error_code ec, lock) {
        result = ec;
      }));
      signal.emit(asio::cancellation_type::terminal);
      co_await s.async_exists("/", use_awaitable);
      CHECK(co_await settles_at(s, path, 1));
      asio::steady_timer settle(io, 50ms);
      co_await settle.async_wait(use_awaitable);
      REQUIRE(result.has_value());
      CHECK(*result == asio::error::operation_aborted);
    }
    // While waiting: with awaitable operators.
    {
      asio::steady_timer timer(io, 100ms);
      CHECK(co_await settles_at(s, path, 1));
      auto r = co_await (m.async_acquire(use_awaitable) || timer.async_wait(use_awaitable));
      CHECK(r.index() == 1);
      CHECK(co_await settles_at(s, path, 1));
    }
    // A timeout.
    {
      auto [ec, l] = co_await m.async_acquire_for(100ms, as_tuple(use_awaitable));
      CHECK(ec == error::lock_timeout);
      CHECK_FALSE(l.held());
      CHECK(co_await settles_at(s, path, 1));
    }
    // try_acquire while held: busy, nothing left.
    {
      auto [ec, l] = co_await m.async_try_acquire(as_tuple(use_awaitable));
      CHECK(ec == error::lock_busy);
      CHECK(co_await settles_at(s, path, 1));
    }
    // 1,000 random cancellations while the holder comes and goes.
    for (int i = 0; i < 1000; ++i) {
      asio::steady_timer timer(io, std::chrono::microseconds(i * 97 % 3000));
      auto r = co_await (m.async_acquire(use_awaitable) || timer.async_wait(use_awaitable));
      if (r.index() == 0) co_await std::get<0>(r).async_release(use_awaitable);
      if (i == 500) co_await held.async_release(use_awaitable);
    }
    CHECK(co_await settles_at(s, path, 0));
    // Free: try_acquire takes it.
    auto [ec, l] = co_await m.async_try_acquire(as_tuple(use_awaitable));
    CHECK(!ec);
    CHECK(l.held());
    co_await l.async_release(use_awaitable);
  }());
}

TEST_CASE("reentrancy by owner; releases report twice and lost") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-reentrant");
  mutex m(s, path);
  mutex other_mutex(other, path);
  run(io, [&]() -> awaitable<void> {
    owner me;
    auto outer = co_await m.async_acquire({.who = me}, use_awaitable);
    auto inner = co_await m.async_acquire({.who = me}, use_awaitable);  // at once, same node
    CHECK(inner.node() == outer.node());
    CHECK((co_await lock_nodes(s, path)).size() == 1);
    co_await owner_and_timeout_combine(m, me, outer);
    co_await inner.async_release(use_awaitable);
    co_await other.async_connect(use_awaitable);  // a try is one look: not_connected while it connects
    auto [busy, none] = co_await other_mutex.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy == error::lock_busy);  // still held by the outer grant
    // Another owner with a timeout waits, and is granted in time once the
    // last grant of `me` is released.
    acquire_outcome waiting(io);
    owner stranger;
    m.async_acquire({.who = stranger, .timeout = 10s}, waiting.handler());
    co_await outer.async_release(use_awaitable);
    REQUIRE(co_await waiting.done.wait(10s));
    CHECK_FALSE(*waiting.ec);
    co_await waiting.held.async_release(use_awaitable);
    CHECK((co_await lock_nodes(s, path)).empty());
    // A second release is harmless and says so.
    auto [twice] = co_await outer.async_release(as_tuple(use_awaitable));
    CHECK(twice == error::not_held);

    // Without an owner, acquires are strangers: the second waits.
    auto a = co_await m.async_acquire(use_awaitable);
    auto [ec, b] = co_await m.async_acquire_for(50ms, as_tuple(use_awaitable));
    CHECK(ec == error::lock_timeout);

    // The node deleted by an operator: the lost signal fires, release says lost.
    bool fired = false;
    test_event lost(io.get_executor());
    a.lost_slot().assign([&](asio::cancellation_type) {
      fired = true;
      lost.count();
    });
    co_await other.async_remove(a.node(), use_awaitable);
    CHECK(co_await lost.wait());
    CHECK(a.lost());
    auto [released] = co_await a.async_release(as_tuple(use_awaitable));
    CHECK(released == error::lock_lost);
    CHECK(fired);
  }());
}

TEST_CASE("a cancelled release (terminal or partial) completes at once, and the node still goes") {
  zk_servers servers;
  asio::io_context io;
  session s(io, test_options(servers.hosts(), 10s));
  session observer(io, test_options(servers.hosts(), 10s));
  mutex m(s, "/release");
  run(io, [&]() -> awaitable<void> {
    // With awaitable operators (terminal).
    auto held = co_await m.async_acquire(use_awaitable);
    auto node = held.node();
    // The server cannot answer the delete: only cancellation can end the wait.
    servers.pause();
    asio::steady_timer timer(io, 100ms);
    auto r = co_await (held.async_release(use_awaitable) || timer.async_wait(use_awaitable));
    CHECK(r.index() == 1);
    CHECK_FALSE(held.held());
    servers.resume();
    // The delete went on in the background.
    co_await observer.async_wait_deleted(node, use_awaitable);
    CHECK((co_await lock_nodes(observer, "/release")).empty());

    // Partial, through a slot.
    held = co_await m.async_acquire(use_awaitable);
    node = held.node();
    servers.pause();
    asio::cancellation_signal cancel;
    std::optional<zkasio::error_code> result;
    test_event done(io.get_executor());
    held.async_release(asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec) {
      result = ec;
      done.count();
    }));
    cancel.emit(asio::cancellation_type::partial);
    bool prompt = co_await done.wait(2s);
    servers.resume();
    REQUIRE(prompt);
    CHECK(*result == asio::error::operation_aborted);
    co_await observer.async_wait_deleted(node, use_awaitable);
  }());
}

TEST_CASE("a held lock's operations made deferred do nothing until launched: the release takes the grant then") {
  asio::io_context io;
  session s(io, test_options(shared_hosts(), 10s));
  auto path = unique_path("deferred-release");
  mutex m(s, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m.async_acquire(use_awaitable);
    auto node = held.node();
    auto release = held.async_release(asio::experimental::deferred);
    std::vector<multi_op> write{op::create{path + "-state", "1"}};
    auto written = held.async_guarded_multi(std::move(write), asio::experimental::deferred);
    CHECK(held.held());  // made, not started
    CHECK(co_await s.async_exists(node, use_awaitable));
    // Launched in the order given: the write under the lock, then the release.
    auto [write_ec, results] = co_await std::move(written)(as_tuple(use_awaitable));
    CHECK_FALSE(write_ec);
    CHECK(results.size() == 2);  // the check's, then the create's
    auto [ec] = co_await std::move(release)(as_tuple(use_awaitable));
    CHECK_FALSE(ec);
    CHECK_FALSE(held.held());
    CHECK_FALSE(co_await s.async_exists(node, use_awaitable));
    co_await s.async_remove(path + "-state", use_awaitable);
  }());
}

TEST_CASE("a release awaited in a coroutine that a terminal cancellation reached already never starts: the lock stays held until its object goes") {
  asio::io_context io;
  session s(io, test_options(shared_hosts(), 10s));
  auto path = unique_path("release-cancelled-coroutine");
  mutex m(s, path);
  std::optional<lock> held;  // outlives the coroutine that releases it
  run(io, [&]() -> awaitable<void> {
    held = co_await m.async_acquire(use_awaitable);
    asio::cancellation_signal cancel;
    test_event suspended(io.get_executor()), ended(io.get_executor());
    std::exception_ptr failure;
    asio::steady_timer forever(io, 1h);
    asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
          suspended.count();
          co_await forever.async_wait(as_tuple(use_awaitable));  // cancelled here, without a throw
          co_await held->async_release(use_awaitable);           // refused before it starts
        },
        asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
          failure = e;
          ended.count();
        }));
    REQUIRE(co_await suspended.wait(5s));
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await ended.wait(5s));
    CHECK(failure);
    CHECK(held->held());
    CHECK(co_await settles_at(s, path, 1));
    held.reset();  // the lock's end releases it
    CHECK(co_await settles_at(s, path, 0));
  }());
}

TEST_CASE("a deferred acquire_for counts its timeout from its launch, not from when it was made") {
  asio::io_context io;
  session s(io, test_options(shared_hosts(), 10s));
  mutex m(s, unique_path("deferred-timeout"));
  semaphore sem(s, unique_path("deferred-timeout-semaphore"), 1);
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    auto acquire = m.async_acquire_for(1s, asio::experimental::deferred);
    auto lease = sem.async_acquire_for(1s, asio::experimental::deferred);
    // Longer than the timeout: counted from here, it had passed at the launch.
    asio::steady_timer later(io, 1200ms);
    co_await later.async_wait(use_awaitable);
    auto [ec, held] = co_await std::move(acquire)(as_tuple(use_awaitable));
    CHECK_FALSE(ec);
    auto [lease_ec, leased] = co_await std::move(lease)(as_tuple(use_awaitable));
    CHECK_FALSE(lease_ec);
    co_await held.async_release(use_awaitable);
    co_await leased.async_release(use_awaitable);
  }());
}

TEST_CASE("revocation, guarded writes and with_lock's body bound to the lost signal") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-revoke");
  mutex m(s, path);
  mutex other_mutex(other, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m.async_acquire(use_awaitable);
    // Guarded writes go through while held.
    std::vector<multi_op> write{op::create{path + "-state", "1"}};
    auto results = co_await held.async_guarded_multi(std::move(write), use_awaitable);
    CHECK(results.size() == 2);

    // A body running under the lost signal is aborted by a revocation.
    zkasio::error_code body_ec;
    auto body = [&]() -> awaitable<void> {
      asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
      co_await forever.async_wait(asio::redirect_error(use_awaitable, body_ec));
    };
    auto revoke = [&]() -> awaitable<void> {
      co_await other_mutex.async_revoke(held.node(), use_awaitable);
    };
    co_await (asio::co_spawn(held.get_executor(), body(),
                             asio::bind_cancellation_slot(held.lost_slot(), use_awaitable)) &&
              revoke());
    CHECK(body_ec == asio::error::operation_aborted);
    CHECK(held.lost());

    // Revoking what nobody holds: a clear error.
    auto [ec] = co_await other_mutex.async_revoke(path + "/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000999",
                                                  as_tuple(use_awaitable));
    CHECK(ec == error::not_held);
    auto [bad] = co_await other_mutex.async_revoke(path + "/garbage", as_tuple(use_awaitable));
    CHECK(bad == error::not_held);
    // A node's bare name, or a path not under the lock's: which path is meant?
    for (auto wrong : {held.node().substr(path.size() + 1), std::string("/elsewhere/x"), path, path + "/"}) {
      CAPTURE(wrong);
      auto [outside] = co_await other_mutex.async_revoke(wrong, as_tuple(use_awaitable));
      CHECK(outside == error::invalid_path);
    }

    // After the node is gone, guarded writes fail and change nothing.
    co_await other.async_remove(held.node(), use_awaitable);
    std::vector<multi_op> late{op::set_data{path + "-state", "2"}};
    auto [guard_ec, guard_results] = co_await held.async_guarded_multi(std::move(late), as_tuple(use_awaitable));
    CHECK(guard_ec == error::lock_lost);
    CHECK((co_await s.async_get_data(path + "-state", use_awaitable)).data == "1");
    co_await s.async_remove(path + "-state", use_awaitable);

    // with_lock revoked during its body: lock_lost, not a plain cancellation.
    zkasio::error_code failure;
    try {
      co_await with_lock(m, [&](const lock& inside) -> awaitable<void> {
        co_await other_mutex.async_revoke(inside.node(), use_awaitable);
        asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
        co_await forever.async_wait(use_awaitable);
      });
    } catch (const zkasio::system_error& e) {
      failure = e.code();
    }
    CHECK(failure == error::lock_lost);
  }());
}

// A holder's session and mutex, and another session that acts as an operator would.
struct holder_and_operator {
  asio::io_context io;
  session s{io, test_options(shared_hosts())};
  session other{io, test_options(shared_hosts())};
  std::string path = unique_path("mutex-lost");
  mutex m{s, path};
};

TEST_CASE_FIXTURE(holder_and_operator, "with_lock: the body runs under the lock and is aborted when the lock is lost") {
  run(io, [&]() -> awaitable<void> {
    // A body that completes: its result comes back and the lock is released.
    int value = co_await with_lock(m, [&]() -> awaitable<int> {
      CHECK((co_await lock_nodes(s, path)).size() == 1);
      co_return 42;
    });
    CHECK(value == 42);
    CHECK((co_await lock_nodes(s, path)).empty());

    // A body interrupted by the loss of the lock (its node deleted by an operator).
    zkasio::error_code aborted;
    std::string what, node;
    try {
      co_await with_lock(m, [&]() -> awaitable<void> {
        auto nodes = co_await lock_nodes(s, path);
        node = path + "/" + nodes.front();
        co_await other.async_remove(node, use_awaitable);
        asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
        co_await forever.async_wait(use_awaitable);
      });
    } catch (const zkasio::system_error& e) {
      aborted = e.code();
      what = e.what();
    }
    CHECK(aborted == error::lock_lost);  // not a plain cancellation: the lock was lost
    // The error names the lock node (before: "with_lock : the lock was lost").
    // (Boost's system_error adds " [category:value]".)
    CHECK(what.starts_with("with_lock " + node + ": the lock was lost"));
  }());
}

TEST_CASE_FIXTURE(holder_and_operator, "async_wait_lost: completes at the loss, also one that came first; not_held once released; cancellable") {
  run(io, [&]() -> awaitable<void> {
    // Nothing held: not_held at once.
    lock none;
    auto [none_ec] = co_await none.async_wait_lost(as_tuple(use_awaitable));
    CHECK(none_ec == error::not_held);

    // Cancelled (here by a timer's win): operation_aborted, the lock still held.
    auto held = co_await m.async_acquire();
    asio::steady_timer soon(io, 1ms);
    auto raced = co_await (held.async_wait_lost(as_tuple(use_awaitable)) || soon.async_wait(use_awaitable));
    CHECK(raced.index() == 1);
    CHECK_FALSE(held.lost());

    // Work stopped by the loss, through the awaitable operators.
    zkasio::error_code work_ec;
    auto work = [&]() -> awaitable<void> {
      asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
      co_await forever.async_wait(asio::redirect_error(use_awaitable, work_ec));
    };
    auto operator_delete = [&]() -> awaitable<void> {
      co_await other.async_remove(held.node(), use_awaitable);
    };
    auto stopped = co_await ((work() || held.async_wait_lost()) && operator_delete());
    CHECK(stopped.index() == 1);
    CHECK(work_ec == asio::error::operation_aborted);
    CHECK(held.lost());

    // A wait that starts after the loss completes at once.
    auto [late_ec] = co_await held.async_wait_lost(as_tuple(use_awaitable));
    CHECK_FALSE(late_ec);
    // So does every operation bound to the lost signal after the loss, one
    // after the other (the slots of those done are dropped as it goes).
    for (int turn = 0; turn < 3; ++turn) {
      asio::steady_timer late_work(io, 1h);
      auto [late_work_ec] = co_await late_work.async_wait(
          asio::bind_cancellation_slot(held.lost_slot(), as_tuple(use_awaitable)));
      CHECK(late_work_ec == asio::error::operation_aborted);
    }
    auto [release_ec] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK(release_ec == error::lock_lost);

    // Released while waiting: not_held; after the release: not_held at once.
    auto again = co_await m.async_acquire();
    std::optional<zkasio::error_code> released_wait;
    again.async_wait_lost([&](zkasio::error_code ec) { released_wait = ec; });
    co_await again.async_release();
    CHECK(co_await eventually([&] { return released_wait.has_value(); }));
    CHECK(*released_wait == error::not_held);
    auto [after_ec] = co_await again.async_wait_lost(as_tuple(use_awaitable));
    CHECK(after_ec == error::not_held);

    // Destroyed while waiting: not_held.
    std::optional<zkasio::error_code> dropped_wait;
    {
      auto dropped = co_await m.async_acquire();
      dropped.async_wait_lost([&](zkasio::error_code ec) { dropped_wait = ec; });
    }
    CHECK(co_await eventually([&] { return dropped_wait.has_value(); }));
    CHECK(*dropped_wait == error::not_held);
  }());
}

TEST_CASE("bad input: lock path, ephemeral parent, garbage children") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  CHECK_THROWS_AS(mutex(s, "no-slash"), zkasio::system_error);
  CHECK_THROWS_AS(mutex(s, "/"), zkasio::system_error);
  CHECK_THROWS_AS(mutex(s, "/a//b"), zkasio::system_error);
  auto path = unique_path("mutex-bad");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(path, "", create_options(create_mode::ephemeral), use_awaitable);
    mutex under_ephemeral(s, path + "/lock");
    auto [ec, l] = co_await under_ephemeral.async_acquire(as_tuple(use_awaitable));
    CHECK(ec == zk_error::no_children_for_ephemerals);

    auto dir = unique_path("mutex-garbage");
    co_await s.async_create(dir, "", use_awaitable);
    co_await s.async_create(dir + "/readme", "", use_awaitable);
    co_await s.async_create(dir + "/lock-0000000001", "", use_awaitable);
    co_await s.async_create(dir + "/_c_nonsense-lock-0000000000", "", use_awaitable);
    mutex m(s, dir);
    auto held = co_await m.async_acquire(use_awaitable);  // garbage neither blocks nor crashes
    CHECK(held.held());
    co_await held.async_release(use_awaitable);
  }());
}

TEST_CASE("acquire before the session has connected waits for the connection") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("mutex-early");
  mutex m(s, path);
  CHECK(s.state() == session_state::connecting);
  auto l = run(io, m.async_acquire(use_awaitable));
  CHECK(l.held());
  run(io, l.async_release(use_awaitable));
}

TEST_CASE("a lost create reply: the node is found by its uuid, no duplicate, no deadlock (CURATOR-498)") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 10s));
  session observer(io, test_options(servers.hosts(), 10s));
  mutex m(s, "/lock");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/lock", "", use_awaitable);
    proxy.drop_after_next_request(15);  // ZOO_CREATE2_OP
    auto l = co_await m.async_acquire(use_awaitable);
    CHECK(proxy.wait_cut(5s));
    CHECK(l.held());
    auto nodes = co_await lock_nodes(observer, "/lock");
    REQUIRE(nodes.size() == 1);
    CHECK("/lock/" + nodes[0] == l.node());
    co_await l.async_release(use_awaitable);
    CHECK((co_await lock_nodes(observer, "/lock")).empty());
  }());
}

TEST_CASE("session expiry while holding: the lost signal fires; waiters fail with session_expired (CURATOR-206)") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session s(io, test_options(proxy.address(), 1s));
  session observer(io, test_options(servers.hosts(), 10s));
  mutex m(s, "/lock", {.policy = lost_policy::before_expiry, .safety_margin = 100ms});
  mutex observer_mutex(observer, "/lock");
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m.async_acquire(use_awaitable);
    std::optional<std::chrono::steady_clock::time_point> fired_at;
    test_event lost(io.get_executor());
    held.lost_slot().assign([&](asio::cancellation_type) {
      fired_at = std::chrono::steady_clock::now();
      lost.count();
    });
    auto waiting = co_await observer_mutex.async_contenders(use_awaitable);
    CHECK(waiting.size() == 1);
    proxy.refuse_connections(true);
    proxy.drop_now();
    auto cut_at = std::chrono::steady_clock::now();
    CHECK(co_await lost.wait(10s));
    // The server expires the session (the node goes) only after the signal.
    co_await observer.async_wait_deleted(held.node(), use_awaitable);
    auto gone_at = std::chrono::steady_clock::now();
    REQUIRE(fired_at.has_value());
    CHECK(*fired_at < gone_at);
    CHECK(*fired_at > cut_at);
    proxy.refuse_connections(false);
    auto [ec] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
  }());
}

TEST_CASE("lost-lock policies, cut off or server paused: on_suspend at once, before_expiry at its deadline") {
  zk_servers servers;
  asio::io_context io;
  for (auto [policy, pause] : {std::pair{lost_policy::on_suspend, false}, {lost_policy::before_expiry, false},
                               {lost_policy::on_suspend, true}, {lost_policy::before_expiry, true}}) {
    CAPTURE(static_cast<int>(policy));
    CAPTURE(pause);
    tcp_proxy proxy(servers.host(1));
    session s(io, test_options(proxy.address(), 2s));
    mutex m(s, "/policy", {.policy = policy, .safety_margin = 300ms});
    run(io, [&]() -> awaitable<void> {
      auto held = co_await m.async_acquire(use_awaitable);
      test_event lost(io.get_executor());
      std::chrono::steady_clock::time_point fired_at;
      held.lost_slot().assign([&](asio::cancellation_type) {
        fired_at = std::chrono::steady_clock::now();
        lost.count();
      });
      auto timeout = s.negotiated_timeout();
      if (pause) servers.pause();  // the connection stays open, answers stop
      else proxy.refuse_connections(true), proxy.drop_now();
      auto cut_at = std::chrono::steady_clock::now();
      // A plain timer of the same io_context set for the deadline: how late
      // this process runs its timers (a loaded machine's lateness is not
      // the library's). Set again if last_contact still moves: an answer
      // already in the socket at the cut is read after it (the likely cause
      // of a signal 265 ms past a timer set once, on a loaded machine).
      // (Under on_suspend the frame ends before the timer: its handler, then
      // called with operation_aborted, touches nothing of the frame.)
      std::optional<std::chrono::steady_clock::time_point> timer_fired_at;
      asio::steady_timer at_deadline(io);
      std::function<void()> arm = [&] {
        auto due = s.last_contact() + timeout - 300ms;
        at_deadline.expires_at(due);
        at_deadline.async_wait([&, due](zkasio::error_code ec) {
          if (ec) return;
          if (s.last_contact() + timeout - 300ms != due) return arm();
          timer_fired_at = std::chrono::steady_clock::now();
        });
      };
      arm();
      REQUIRE(co_await lost.wait(10s));
      auto contact = s.last_contact();  // (no answer moves it any more)
      if (pause) servers.resume();
      if (policy == lost_policy::on_suspend) {
        // At once: as soon as the client notices the cut; a paused server is
        // noticed when no answer came for 2/3 of the timeout (tolerance 1 s).
        CHECK(fired_at - cut_at < (pause ? timeout * 2 / 3 + 1s : 1s));
      } else {
        // At last contact + timeout - margin: not before, and not later than
        // 200 ms after the plain timer set for that moment fired.
        auto deadline = contact + timeout - 300ms;
        CHECK(fired_at >= deadline);
        REQUIRE(co_await eventually([&] { return timer_fired_at.has_value(); }, 5s));
        CHECK(fired_at - std::max(deadline, *timer_fired_at) < 200ms);
        CHECK(fired_at < contact + timeout);  // before the server can expire the session
      }
      proxy.refuse_connections(false);
      co_await held.async_release(as_tuple(use_awaitable));
      co_await s.async_close(use_awaitable);
    }());
  }
}

TEST_CASE("a waiter in the middle whose session expires: the queue still drains in order") {
  zk_servers servers;
  tcp_proxy proxy(servers.host(1));
  asio::io_context io;
  session holder(io, test_options(servers.hosts(), 10s));
  session middle(io, test_options(proxy.address(), 1s));
  session last(io, test_options(servers.hosts(), 10s));
  mutex holder_mutex(holder, "/queue"), middle_mutex(middle, "/queue"), last_mutex(last, "/queue");
  run(io, [&]() -> awaitable<void> {
    auto held = co_await holder_mutex.async_acquire(use_awaitable);
    std::optional<zkasio::error_code> middle_result;
    test_event middle_done(io.get_executor());
    middle_mutex.async_acquire([&](zkasio::error_code ec, lock) {
      middle_result = ec;
      middle_done.count();
    });
    CHECK(co_await settles_at(holder, "/queue", 2));
    std::optional<zkasio::error_code> last_result;
    test_event last_done(io.get_executor());
    last_mutex.async_acquire([&](zkasio::error_code ec, lock l) {
      last_result = ec;
      last_done.count();
      // Hold it until the test releases everything by closing the session.
      asio::co_spawn(io, l.async_release(use_awaitable), asio::detached);
    });
    CHECK(co_await settles_at(holder, "/queue", 3));
    // The middle waiter's session expires: its node goes, its acquire fails.
    proxy.refuse_connections(true);
    proxy.drop_now();
    CHECK(co_await settles_at(holder, "/queue", 2));
    proxy.refuse_connections(false);
    CHECK(co_await middle_done.wait(10s));
    REQUIRE(middle_result.has_value());
    CHECK(*middle_result == zk_error::session_expired);
    CHECK_FALSE(last_done.happened());
    // The holder releases: the last waiter (now next) gets the lock.
    co_await held.async_release(use_awaitable);
    CHECK(co_await last_done.wait(10s));
    REQUIRE(last_result.has_value());
    CHECK(!*last_result);
  }());
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "async_contenders cancelled (total) while its read's reply is held: operation_aborted at once; the late reply changes nothing, the next listing answers right") {
  auto path = unique_path("contenders-total");
  mutex held_mutex(holder, path), listing(s, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await held_mutex.async_acquire(use_awaitable);
    auto generation = co_await waiter_connected();
    cancellable<std::vector<contender>> listed(io);
    co_await cancelled_while_reply_held(proxy, listed, [&](auto handler) { listing.async_contenders(std::move(handler)); });
    auto queue = co_await listing.async_contenders(use_awaitable);
    REQUIRE(queue.size() == 1);
    CHECK(queue[0].node == held.node());
    CHECK(s.generation() == generation);
    co_await held.async_release(use_awaitable);
    CHECK((co_await listing.async_contenders(use_awaitable)).empty());
    CHECK(co_await settles_at(holder, path, 0));
  }());
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "a revocation cancelled after its write was sent: operation_aborted at once; the write goes on, the holder is told; nothing left after its release") {
  auto path = unique_path("revoke-cancelled");
  mutex held_mutex(holder, path), revoking(s, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await held_mutex.async_acquire(use_awaitable);
    test_event lost(io.get_executor());
    zkasio::error_code lost_ec;
    held.async_wait_lost([&](zkasio::error_code ec) {
      lost_ec = ec;
      lost.count();
    });
    co_await waiter_connected();
    proxy.hold_replies();
    auto sent = proxy.requests_forwarded(ZOO_SETDATA_OP);
    cancellable<> revoked(io);
    revoking.async_revoke(held.node(), revoked.handler());
    REQUIRE(co_await eventually([&] { return proxy.requests_forwarded(ZOO_SETDATA_OP) > sent; }));
    revoked.cancel.emit(asio::cancellation_type::terminal);
    bool prompt = co_await revoked.done.wait(2s);
    proxy.pass();
    REQUIRE(prompt);
    CHECK(*revoked.ec == asio::error::operation_aborted);
    // The revocation was written: the holder's lost signal fires.
    REQUIRE(co_await lost.wait(10s));
    CHECK_FALSE(lost_ec);
    CHECK(held.lost());
    CHECK((co_await holder.async_get_data(held.node(), use_awaitable)).data == "__REVOKE__");
    auto [released] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK(released == error::lock_lost);
    CHECK(co_await settles_at(holder, path, 0));
    CHECK((co_await revoking.async_contenders(use_awaitable)).empty());
  }());
}

TEST_CASE_FIXTURE(proxied_server,
                  "a guarded multi cancelled while in flight: operation_aborted at once; its writes, sent, are applied; the lock still releases") {
  session s(io, test_options(proxy.address(), 10s));
  session direct(io, test_options(servers.hosts(), 10s));
  mutex m(s, "/guarded");
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m.async_acquire(use_awaitable);
    proxy.hold_replies();
    auto sent = proxy.requests_forwarded(ZOO_MULTI_OP);
    cancellable<std::vector<op_result>> written(io);
    std::vector<multi_op> write{op::create{"/guarded-state", "1"}};
    held.async_guarded_multi(std::move(write), written.handler());
    REQUIRE(co_await eventually([&] { return proxy.requests_forwarded(ZOO_MULTI_OP) > sent; }));
    written.cancel.emit(asio::cancellation_type::terminal);
    bool prompt = co_await written.done.wait(2s);
    proxy.pass();
    REQUIRE(prompt);
    CHECK(*written.ec == asio::error::operation_aborted);
    // The multi, sent, went on.
    CHECK(co_await eventually_async([&]() -> awaitable<bool> {
      auto [ec, st] = co_await direct.async_exists("/guarded-state", as_tuple(use_awaitable));
      co_return !ec && st.has_value();
    }));
    CHECK((co_await direct.async_get_data("/guarded-state", use_awaitable)).data == "1");
    CHECK(held.held());
    CHECK_FALSE(held.lost());
    auto [released] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK_FALSE(released);
    CHECK(co_await settles_at(direct, "/guarded", 0));
    co_await direct.async_remove("/guarded-state", use_awaitable);
  }());
}

TEST_CASE("async_hold_node: a node of the user's own recipe held as a lock (fence, release, loss, with_hold); refused nodes are left as they were") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto base = unique_path("hold-node");
  auto ephemeral = create_options(create_mode::ephemeral);
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(base, "", use_awaitable);
    auto mine = base + "/mine";
    co_await s.async_create(mine, "", ephemeral, use_awaitable);
    auto stat = co_await s.async_exists(mine, use_awaitable);
    REQUIRE(stat);
    auto held = co_await async_hold_node(s, mine, use_awaitable);
    CHECK(held.held());
    CHECK(held.node() == mine);
    CHECK(held.fencing_token() == fence_token{stat->czxid, 0});
    auto [unfenced, results] = co_await held.async_guarded_multi({}, as_tuple(use_awaitable));
    CHECK(unfenced == error::not_fenced);
    auto [released] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK_FALSE(released);
    CHECK_FALSE(co_await other.async_exists(mine, use_awaitable));

    // An operator deletes it: the lost signal fires, the release says lock_lost.
    co_await s.async_create(mine, "", ephemeral, use_awaitable);
    auto deleted = co_await async_hold_node(s, mine, use_awaitable);
    co_await deleted_by_operator(other, deleted);

    // with_hold: the body runs under it, and the node goes after.
    co_await s.async_create(mine, "", ephemeral, use_awaitable);
    bool ran = false;
    co_await with_hold(async_hold_node(s, mine, use_awaitable), [&](const lock& under) -> awaitable<void> {
      ran = under.held();
      co_return;
    });
    CHECK(ran);
    CHECK_FALSE(co_await other.async_exists(mine, use_awaitable));

    // The session's turn on the path: a race_mutex of the session there, or
    // a second hold of the node, waits for it, and neither touches the node.
    co_await s.async_create(mine, "", ephemeral, use_awaitable);
    auto czxid = (co_await s.async_exists(mine, use_awaitable))->czxid;
    auto first = co_await async_hold_node(s, mine, use_awaitable);
    race_mutex racing(s, mine);
    auto [busy, none_raced] = co_await racing.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy == error::lock_busy);
    auto [twice, none_twice] = co_await async_hold_node(s, mine, as_tuple(use_awaitable));
    CHECK(twice == error::lock_busy);
    CHECK_FALSE(first.lost());
    CHECK((co_await other.async_exists(mine, use_awaitable))->czxid == czxid);
    co_await first.async_release(use_awaitable);
    auto raced = co_await racing.async_acquire(use_awaitable);  // its own node at the path now
    auto [raced_busy, none_held] = co_await async_hold_node(s, mine, as_tuple(use_awaitable));
    CHECK(raced_busy == error::lock_busy);
    CHECK_FALSE(raced.lost());
    co_await raced.async_release(use_awaitable);

    // Refused, every node left as it was.
    auto persistent = base + "/persistent";
    co_await s.async_create(persistent, "", use_awaitable);
    auto theirs = base + "/theirs";
    co_await other.async_create(theirs, "", ephemeral, use_awaitable);
    auto refusal = [&](std::string node) -> awaitable<zkasio::error_code> {
      auto [ec, none] = co_await async_hold_node(s, node, as_tuple(use_awaitable));
      CHECK_FALSE(none.held());
      co_return ec;
    };
    CHECK(co_await refusal(persistent) == error::not_own_node);
    CHECK(co_await refusal(theirs) == error::not_own_node);
    CHECK(co_await refusal(base + "/missing") == zk_error::no_node);
    CHECK(co_await refusal("/") == error::invalid_path);
    CHECK(co_await refusal("no-slash") == error::invalid_path);
    CHECK(co_await other.async_exists(persistent, use_awaitable));
    CHECK(co_await other.async_exists(theirs, use_awaitable));
    co_await s.async_remove(persistent, use_awaitable);
    co_await other.async_remove(theirs, use_awaitable);
    co_await s.async_remove(base, use_awaitable);
  }());
}

TEST_CASE_FIXTURE(proxied_server, "async_hold_node for presence: on_expiry keeps the hold through a cut the session survives; async_leave lets go of it, the node left to its session") {
  // A new user's membership: under the default policy a server restart
  // that the session survived said lost, and releasing the hold deleted the
  // node (the instance vanished from every view for 50 ms). Beside the
  // presence node, a node held under before_expiry (a 3 s margin) shows that
  // the cut outlasted what that policy tolerates.
  session s(io, test_options(proxy.address(), 10s));
  session other(io, test_options(servers.hosts(), 10s));
  auto node = unique_path("presence"), strict = unique_path("presence-strict");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create(node, "me", create_options(create_mode::ephemeral), use_awaitable);
    co_await s.async_create(strict, "", create_options(create_mode::ephemeral), use_awaitable);
    auto generation = s.generation();
    // (Named, not temporaries in a co_await: the g++ 12 caveat, session.md.)
    lock_options presence{.policy = lost_policy::on_expiry}, tight{.safety_margin = 3s};
    auto present = co_await async_hold_node(s, node, presence, use_awaitable);
    auto guarded = co_await async_hold_node(s, strict, tight, use_awaitable);
    lost_signal_log lost(io), strict_lost(io);
    lost.watch(present);
    strict_lost.watch(guarded);
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await strict_lost.fired.wait(15s));  // before_expiry would have said lost by now
    proxy.refuse_connections(false);
    co_await s.async_connect(use_awaitable);
    CHECK(s.generation() == generation);  // the session lived
    CHECK_FALSE(lost.fired.happened());
    CHECK_FALSE(present.lost());
    co_await guarded.async_release(asio::experimental::as_tuple(use_awaitable));
    // Let go without deleting it: the node is the session's, as before.
    CHECK(co_await error_of([&](auto t) { return present.async_leave(t); }) == zkasio::error_code{});
    CHECK_FALSE(present.held());
    CHECK(co_await other.async_exists(node, use_awaitable));
    CHECK(co_await error_of([&](auto t) { return present.async_leave(t); }) == error::not_held);
    // A lock recipe's lock is not left: its node would block the queue.
    mutex m(s, node + "-lock");
    auto held = co_await m.async_acquire(use_awaitable);
    CHECK(co_await error_of([&](auto t) { return held.async_leave(t); }) == error::not_own_node);
    CHECK(held.held());
    co_await held.async_release(use_awaitable);
    // And on_expiry is refused by the lock recipes.
    zkasio::error_code refusal;
    try {
      mutex wrong(s, node + "-lock", {.policy = lost_policy::on_expiry});
    } catch (const zkasio::system_error& e) {
      refusal = e.code();
    }
    CHECK(refusal == error::invalid_policy);
    co_await s.async_close(use_awaitable);
    CHECK_FALSE(co_await other.async_exists(node, use_awaitable));  // gone with its session
  }(), 60s);
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "async_hold_node cancelled while its check's reply is held: operation_aborted at once, and the node stays the caller's") {
  auto node = unique_path("hold-node-cancelled");
  // Terminal and partial alike (the check has no effect to undo yet, but
  // the hold it would make).
  auto type = asio::cancellation_type::terminal;
  SUBCASE("terminal") {}
  SUBCASE("partial") { type = asio::cancellation_type::partial; }
  run(io, [&]() -> awaitable<void> {
    co_await waiter_connected();
    co_await s.async_create(node, "", create_options(create_mode::ephemeral), use_awaitable);
    cancellable<lock> checked(io);
    co_await cancelled_while_reply_held(
        proxy, checked, [&](auto handler) { async_hold_node(s, node, std::move(handler)); }, type);
    // Still there and this session's: a check that went on after the
    // cancellation would have held it and, dropping the lock, deleted it
    // (before this check, on the same session).
    auto held = co_await async_hold_node(s, node, use_awaitable);
    auto [released] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK_FALSE(released);
    CHECK_FALSE(co_await holder.async_exists(node, use_awaitable));
  }());
}
