// zkasio::mutex's in-process handoff (mutex_options::local_handoff) against a
// real server: one node for a lock object's contenders, handed over in
// memory in their order; another session's contender goes next within the
// bound; a loss, an expiry and cancellation during a run; reentrancy; bad
// options.
#include <doctest/doctest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <set>
#include <thread>
#include <zkasio/election.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

#include "support/async.hpp"
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

template <>
struct doctest::StringMaker<zkasio::fence_token> {
  static doctest::String convert(const zkasio::fence_token& f) {
    return ("(" + std::to_string(f.czxid) + ", " + std::to_string(f.local) + ")").c_str();
  }
};

namespace {

// Acquires started with a callback on `m`, in this order.
std::vector<std::unique_ptr<acquire_outcome>> start_acquires(asio::io_context& io, mutex& m, int count) {
  std::vector<std::unique_ptr<acquire_outcome>> started;
  for (int i = 0; i < count; ++i) {
    started.push_back(std::make_unique<acquire_outcome>(io));
    m.async_acquire(started.back()->handler());
  }
  return started;
}

// Waits (at most 10 s) until the queue under `path` is two nodes, the last
// not `leader_node`.
awaitable<bool> leader_replaced(session& s, std::string path, std::string leader_node) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    auto nodes = co_await lock_nodes(s, path);
    if (nodes.size() == 2 && nodes.back() != leader_node) co_return true;
    asio::steady_timer pause(co_await asio::this_coro::executor, 5ms);
    co_await pause.async_wait(use_awaitable);
  }
  co_return false;
}

// Cuts the session of `held` off at the proxy until the server has expired
// it (seen by `observer`): the lock's lost signal fires before.
awaitable<void> expire(proxied_server& f, session& observer, lock& held) {
  lost_signal_log lost(f.io);
  lost.watch(held);
  f.proxy.refuse_connections(true);
  f.proxy.drop_now();
  REQUIRE(co_await lost.fired.wait(10s));
  co_await observer.async_wait_deleted(held.node(), use_awaitable);
  f.proxy.refuse_connections(false);
}

// After a loss: `leader` holds under the node it queued, and releases; the
// run goes on under that node, `next` handed the lock in memory; then
// nothing is left under `path`.
awaitable<void> goes_on_under(session& s, std::string path, acquire_outcome& leader, acquire_outcome& next) {
  auto czxid = leader.held.fencing_token().czxid;
  co_await leader.held.async_release(use_awaitable);
  REQUIRE(co_await granted(next));
  CHECK(next.held.fencing_token() == fence_token{czxid, 1});
  co_await next.held.async_release(use_awaitable);
  CHECK(co_await settles_at(s, path, 0));
}

// A session and a mutex handing over in memory on a path of its own.
struct handing_mutex {
  asio::io_context io;
  session s{io, test_options(shared_hosts())};
  std::string path = unique_path("local");
  mutex m{s, path, handing_over()};
};

}  // namespace

TEST_CASE_FIXTURE(handing_mutex, "local handoff: 64 coroutines take turns under one node, in their order, each fence greater") {
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    CHECK(first.fencing_token() == fence_token{first.fencing_token().czxid, 0});
    auto waiting = start_acquires(io, m, 63);
    // They wait in this process: no node of theirs.
    CHECK((co_await lock_nodes(s, path)).size() == 1);
    auto node = first.node();
    auto czxid = first.fencing_token().czxid;
    co_await first.async_release(use_awaitable);
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      CAPTURE(i);
      auto& w = *waiting[i];
      REQUIRE(co_await granted(w));
      // Nobody after it was granted before it: one holder at a time, in order.
      for (std::size_t j = i + 1; j < waiting.size(); ++j) CHECK_FALSE(waiting[j]->done.happened());
      CHECK(w.held.node() == node);
      CHECK(w.held.fencing_token() == fence_token{czxid, i + 1});
      CHECK_FALSE(w.held.lost());
      co_await w.held.async_release(use_awaitable);
    }
    CHECK(co_await settles_at(s, path, 0));
  }());
}

TEST_CASE("local handoff: mutual exclusion of 60 coroutines over 3 sessions, fences increasing as pairs") {
  asio::io_context io;
  objects_over_sessions<mutex> mutexes(io, "local-exclusion", 3, handing_over(4, 20ms));
  constexpr int contenders = 60, rounds = 30;
  int holding = 0, overlaps = 0;
  std::vector<fence_token> fences;
  auto contender = [&](mutex& m) -> awaitable<void> {
    for (int i = 0; i < rounds; ++i) {
      auto l = co_await m.async_acquire(use_awaitable);
      if (++holding > 1) ++overlaps;
      fences.push_back(l.fencing_token());
      asio::steady_timer work(co_await asio::this_coro::executor, std::chrono::microseconds(i % 3 * 100));
      co_await work.async_wait(use_awaitable);
      --holding;
      co_await l.async_release(use_awaitable);
    }
  };
  CHECK(run_coroutines(io, contenders, [&](int i) { return contender(mutexes[i]); }, 600s) == 0);
  CHECK(overlaps == 0);
  REQUIRE(fences.size() == contenders * rounds);
  CHECK(std::adjacent_find(fences.begin(), fences.end(), std::greater_equal<>()) == fences.end());
  std::set<std::int64_t> nodes;
  for (auto& f : fences) nodes.insert(f.czxid);
  MESSAGE(fences.size() << " grants on " << nodes.size() << " nodes");
  CHECK(nodes.size() < fences.size() / 2);  // most grants were handed over in memory
  CHECK(nodes.size() > 3);                  // and the sessions took turns
  run(io, [&]() -> awaitable<void> { CHECK((co_await lock_nodes(mutexes.first_session(), mutexes.path)).empty()); }());
}

TEST_CASE("local handoff: another session's contender goes next once the bound is used up") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("local-bound");
  std::size_t max_run = 2;
  std::chrono::milliseconds max_time = 1h;
  SUBCASE("max_run") {}
  SUBCASE("max_time") {
    max_run = 1000;
    max_time = 0ms;
  }
  CAPTURE(max_run);
  mutex m(s, path, handing_over(max_run, max_time));
  mutex other_mutex(other, path);
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    // After the hold's listing of the queue (sent first, on the strand): its
    // children watch is set before the other contender's create.
    co_await m.async_contenders(use_awaitable);
    auto local = start_acquires(io, m, 4);
    acquire_outcome foreign(io);
    other_mutex.async_acquire(foreign.handler());
    // Seen by this session: its watch's event came before this listing's answer.
    REQUIRE(co_await settles_at(s, path, 2));
    auto czxid = first.fencing_token().czxid;
    co_await first.async_release(use_awaitable);
    std::size_t handed = max_time == 0ms ? 0 : max_run;
    for (std::size_t i = 0; i < handed; ++i) {
      REQUIRE(co_await granted(*local[i]));
      CHECK(local[i]->held.fencing_token() == fence_token{czxid, i + 1});
      CHECK_FALSE(foreign.done.happened());
      co_await local[i]->held.async_release(use_awaitable);
    }
    // The bound is used up: the node went, the other contender holds, and
    // the next local one queued a node of its own behind it.
    REQUIRE(co_await granted(foreign));
    CHECK(co_await settles_at(s, path, 2));
    CHECK_FALSE(local[handed]->done.happened());
    auto foreign_czxid = foreign.held.fencing_token().czxid;
    co_await foreign.held.async_release(use_awaitable);
    REQUIRE(co_await granted(*local[handed]));
    auto second = local[handed]->held.fencing_token();
    CHECK(second.czxid > foreign_czxid);
    CHECK(second.local == 0);
    co_await local[handed]->held.async_release(use_awaitable);
    // Nobody else queued: the rest are handed over on that node.
    for (std::size_t i = handed + 1; i < local.size(); ++i) {
      REQUIRE(co_await granted(*local[i]));
      CHECK(local[i]->held.fencing_token().czxid == second.czxid);
      co_await local[i]->held.async_release(use_awaitable);
    }
    CHECK(co_await settles_at(s, path, 0));
  }());
}

// The lead handed to a waiter in the strand tick its deadline fires: on one
// thread, the release starts 1 ms before the waiter's deadline and the
// thread is kept busy past it, so the deadline's timer is queued before the
// wait's completion and wins. The waiter fails with lock_timeout; the lead
// must not go with it (before: the run stayed active with nobody leading,
// and every later acquire on the object waited for ever).
TEST_CASE("local handoff: the lead handed over as the waiter's deadline fires goes on: no lock object wedged") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  session other(io, test_options(shared_hosts()));
  auto path = unique_path("local-lead-deadline");
  // max_time 0: once another session's node is seen, a release deletes the
  // node and passes the lead to the next waiter.
  mutex m(s, path, handing_over(16, 0ms));
  mutex other_mutex(other, path);
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    co_await m.async_contenders(use_awaitable);  // the hold's children watch is set
    acquire_outcome foreign(io);
    other_mutex.async_acquire(foreign.handler());
    REQUIRE(co_await settles_at(s, path, 2));  // seen by the hold's watch first
    auto deadline = std::chrono::steady_clock::now() + 200ms;
    acquire_outcome waiter(io);
    m.async_acquire_until(deadline, waiter.handler());
    asio::steady_timer just_before(io, deadline - 1ms);
    just_before.async_wait([&](zkasio::error_code) {
      first.async_release(asio::detached);
      std::this_thread::sleep_until(deadline + 5ms);
    });
    REQUIRE(co_await waiter.done.wait(10s));
    if (*waiter.ec) CHECK(*waiter.ec == error::lock_timeout);
    // Granted by the lead's next node or not: nothing of this object blocks.
    if (waiter.held) co_await waiter.held.async_release(use_awaitable);
    REQUIRE(co_await granted(foreign));
    co_await foreign.held.async_release(use_awaitable);
    // (A node the waiter queued with the lead goes in the background.)
    REQUIRE(co_await settles_at(s, path, 0));
    // The object grants a free lock: a try takes it, a timed acquire too.
    auto [try_ec, tried] = co_await m.async_try_acquire(as_tuple(use_awaitable));
    CHECK_FALSE(try_ec);
    CHECK(tried.held());
    if (tried) co_await tried.async_release(use_awaitable);
    auto [timed_ec, timed] = co_await m.async_acquire_for(5s, as_tuple(use_awaitable));
    CHECK_FALSE(timed_ec);
    if (timed) co_await timed.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));
  }());
}

TEST_CASE_FIXTURE(handing_mutex, "local handoff: the holder's node deleted by an operator: the next goes on under a node of its own") {
  session operator_session(io, test_options(shared_hosts()));
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(first);
    auto local = start_acquires(io, m, 2);
    co_await operator_session.async_remove(first.node(), use_awaitable);
    REQUIRE(co_await lost.fired.wait(10s));
    // Not handed a lock that is lost: the next queued a node and holds,
    // while the lost holder has not released yet (it was told to stop).
    REQUIRE(co_await granted(*local[0]));
    CHECK(local[0]->held.fencing_token() > first.fencing_token());
    CHECK(local[0]->held.fencing_token().local == 0);
    auto [ec] = co_await first.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
    CHECK_FALSE(local[1]->done.happened());
    co_await goes_on_under(s, path, *local[0], *local[1]);
  }());
}

TEST_CASE_FIXTURE(handing_mutex, "local handoff: a lock handed over in memory, then lost with its node: its holder is told, the next queues a node of its own") {
  session operator_session(io, test_options(shared_hosts()));
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    auto czxid = first.fencing_token().czxid;
    auto local = start_acquires(io, m, 3);
    co_await first.async_release(use_awaitable);
    REQUIRE(co_await granted(*local[0]));
    REQUIRE(local[0]->held.fencing_token() == fence_token{czxid, 1});  // handed over, under the same node
    lost_signal_log lost(io);
    lost.watch(local[0]->held);
    co_await operator_session.async_remove(local[0]->held.node(), use_awaitable);
    REQUIRE(co_await lost.fired.wait(10s));
    // The lead went on with the loss: the next queued a node and holds while
    // the lost holder has not released yet, under a token of its own.
    REQUIRE(co_await granted(*local[1]));
    CHECK(local[1]->held.fencing_token().czxid > czxid);
    CHECK(local[1]->held.fencing_token().local == 0);
    auto [ec] = co_await local[0]->held.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
    CHECK_FALSE(local[2]->done.happened());
    co_await goes_on_under(s, path, *local[1], *local[2]);
  }());
}

TEST_CASE_FIXTURE(handing_mutex, "local handoff: the holder revoked: the next queues behind its node and goes once it is released") {
  session other(io, test_options(shared_hosts()));
  mutex other_mutex(other, path);
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(first);
    auto local = start_acquires(io, m, 2);
    co_await other_mutex.async_revoke(first.node(), use_awaitable);
    REQUIRE(co_await lost.fired.wait(10s));
    // Not handed a lock that may be lost: the next queued a node of its own,
    // behind the revoked one, which is still there.
    REQUIRE(co_await settles_at(s, path, 2));
    CHECK_FALSE(local[0]->done.happened());
    auto czxid = first.fencing_token().czxid;
    auto [ec] = co_await first.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
    REQUIRE(co_await granted(*local[0]));
    CHECK(local[0]->held.fencing_token().czxid > czxid);
    co_await goes_on_under(s, path, *local[0], *local[1]);
  }());
}

TEST_CASE_FIXTURE(proxied_server, "local handoff: the session expires during a run: the holder is told, the waiters fail") {
  session s(io, test_options(proxy.address(), 1s));
  session observer(io, test_options(servers.hosts(), 10s));
  mutex m(s, "/lock", handing_over());
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    auto local = start_acquires(io, m, 3);
    co_await expire(*this, observer, first);
    // They waited in the session that expired: they lost their place, as a
    // waiter's node goes with its session (requeue_on_expiry is off).
    for (auto& w : local) {
      REQUIRE(co_await w->done.wait(10s));
      CHECK(*w->ec == zk_error::session_expired);
    }
    auto [ec] = co_await first.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
  }());
}

TEST_CASE_FIXTURE(proxied_server, "local handoff: with requeue_on_expiry the run goes on in the next session") {
  session s(io, test_options(proxy.address(), 1s));
  session observer(io, test_options(servers.hosts(), 10s));
  mutex_options options = handing_over();
  options.requeue_on_expiry = true;
  mutex m(s, "/lock", options);
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    auto local = start_acquires(io, m, 2);
    co_await expire(*this, observer, first);
    // The next leads in the new session; the one behind it is handed the lock there.
    REQUIRE(co_await granted(*local[0]));
    CHECK(local[0]->held.fencing_token().local == 0);
    CHECK(local[0]->held.fencing_token() > first.fencing_token());
    auto czxid = local[0]->held.fencing_token().czxid;
    co_await local[0]->held.async_release(use_awaitable);
    REQUIRE(co_await granted(*local[1]));
    CHECK(local[1]->held.fencing_token() == fence_token{czxid, 1});
    co_await local[1]->held.async_release(use_awaitable);
    auto [ec] = co_await first.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
    CHECK(co_await settles_at(observer, "/lock", 0));
  }());
}

TEST_CASE_FIXTURE(proxied_server, "local handoff: a waiter given the lead while disconnected keeps its deadline") {
  session s(io, test_options(proxy.address(), 10s));
  mutex_options options = handing_over();
  options.policy = lost_policy::on_suspend;  // the holder's loss, and so the lead, at the cut
  mutex m(s, "/lock", options);
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(first);
    acquire_outcome waiter(io);
    m.async_acquire_for(1s, waiter.handler());
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await lost.fired.wait(5s));
    REQUIRE(co_await waiter.done.wait(5s));
    CHECK(*waiter.ec == error::not_connected);  // disconnected at its deadline: unreachable, not busy
    proxy.refuse_connections(false);
    auto [ec] = co_await first.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
  }());
}

TEST_CASE_FIXTURE(handing_mutex, "local handoff: the session closed during a run: the holder is told, the waiters fail") {
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(first);
    auto local = start_acquires(io, m, 3);
    co_await s.async_close(use_awaitable);
    REQUIRE(co_await lost.fired.wait(10s));
    for (auto& w : local) {
      REQUIRE(co_await w->done.wait(10s));
      CHECK(*w->ec == error::session_closed);
    }
  }());
}

TEST_CASE("local handoff: cancellation, timeouts and tries in a run leave no node and no waiter behind") {
  asio::io_context io;
  session holder_session(io, test_options(shared_hosts()));
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("local-cancel");
  mutex holder_mutex(holder_session, path);
  mutex m(s, path, handing_over());
  run(io, [&]() -> awaitable<void> {
    auto held = co_await holder_mutex.async_acquire(use_awaitable);
    // The run's leader queues behind the other session's holder.
    asio::cancellation_signal cancel_leader, cancel_waiter;
    acquire_outcome leader(io), waiter(io), next(io);
    m.async_acquire(asio::bind_cancellation_slot(cancel_leader.slot(), leader.handler()));
    m.async_acquire(asio::bind_cancellation_slot(cancel_waiter.slot(), waiter.handler()));
    m.async_acquire(next.handler());
    REQUIRE(co_await settles_at(s, path, 2));
    // A waiter in the run leaves at once (partial cancellation too).
    cancel_waiter.emit(asio::cancellation_type::partial);
    REQUIRE(co_await waiter.done.wait(10s));
    CHECK(*waiter.ec == asio::error::operation_aborted);
    // A try while the run has a leader: busy at once; a timeout: lock_timeout.
    auto [try_ec, tried] = co_await m.async_try_acquire(as_tuple(use_awaitable));
    CHECK(try_ec == error::lock_busy);
    auto [timeout_ec, timed] = co_await m.async_acquire_for(50ms, as_tuple(use_awaitable));
    CHECK(timeout_ec == error::lock_timeout);
    CHECK((co_await lock_nodes(s, path)).size() == 2);
    // The leader cancelled: its node goes, and the next leads with a node of its own.
    auto leader_node = (co_await lock_nodes(s, path)).back();
    cancel_leader.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await leader.done.wait(10s));
    CHECK(*leader.ec == asio::error::operation_aborted);
    CHECK(co_await leader_replaced(s, path, leader_node));
    CHECK_FALSE(next.done.happened());
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await granted(next));
    co_await next.held.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));

    // A try that leads the run, busy behind another session's holder, with a
    // contender waiting behind it: that one leads next.
    held = co_await holder_mutex.async_acquire(use_awaitable);
    acquire_outcome tried_first(io), behind(io);
    m.async_try_acquire(tried_first.handler());
    m.async_acquire(behind.handler());
    REQUIRE(co_await tried_first.done.wait(10s));
    CHECK(*tried_first.ec == error::lock_busy);
    REQUIRE(co_await settles_at(s, path, 2));
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await granted(behind));
    co_await behind.held.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));

    // A waiter given the lead whose deadline passes while its node is queued
    // behind the other session's holder: its node goes, the lead passes on.
    held = co_await holder_mutex.async_acquire(use_awaitable);
    asio::cancellation_signal cancel_first;
    acquire_outcome first_leader(io), timed_out(io), last(io);
    m.async_acquire(asio::bind_cancellation_slot(cancel_first.slot(), first_leader.handler()));
    m.async_acquire_for(2s, timed_out.handler());
    m.async_acquire(last.handler());
    REQUIRE(co_await settles_at(s, path, 2));
    REQUIRE_FALSE(timed_out.done.happened());
    cancel_first.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await timed_out.done.wait(10s));
    CHECK(*timed_out.ec == error::lock_timeout);
    CHECK_FALSE(last.done.happened());
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await granted(last));
    co_await last.held.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));
  }());
}

TEST_CASE_FIXTURE(handing_mutex, "local handoff: reentrancy by owner; the next owner (with a timeout) is handed the lock after the last release, in time") {
  owner a, b;
  run(io, [&]() -> awaitable<void> {
    auto outer = co_await m.async_acquire({.who = a}, use_awaitable);
    acquire_outcome other(io);
    m.async_acquire({.who = b, .timeout = 10s}, other.handler());
    auto inner = co_await m.async_acquire({.who = a}, use_awaitable);
    CHECK(inner.fencing_token() == outer.fencing_token());
    co_await inner.async_release(use_awaitable);
    CHECK_FALSE(other.done.happened());
    auto czxid = outer.fencing_token().czxid;
    co_await outer.async_release(use_awaitable);
    REQUIRE(co_await granted(other));
    CHECK(other.held.fencing_token() == fence_token{czxid, 1});
    auto again = co_await m.async_acquire({.who = b}, use_awaitable);
    CHECK(again.fencing_token() == other.held.fencing_token());
    co_await again.async_release(use_awaitable);
    co_await other.held.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));
  }());
}

TEST_CASE_FIXTURE(handing_mutex, "local handoff: a guarded write made before its lock's release and started after it writes nothing") {
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    auto next = start_acquires(io, m, 1);
    // (use_awaitable starts the operation when awaited: by then this lock's
    // grant is released, though its node is the next holder's.)
    auto late = first.async_guarded_multi({op::create{.path = path + "-data", .data = "", .options = {}}}, as_tuple(use_awaitable));
    co_await first.async_release(use_awaitable);
    REQUIRE(co_await granted(*next[0]));  // the node is the same, and held by another
    auto [ec, results] = co_await std::move(late);
    CHECK(ec == error::not_held);
    CHECK_FALSE(co_await s.async_exists(path + "-data", use_awaitable));
    co_await next[0]->held.async_release(use_awaitable);
  }());
}

// Only a mutex hands its lock over in memory: another recipe given a bound
// does not compile (it was a run-time invalid_argument).
template <class Options>
constexpr bool takes_local_handoff = requires { Options{.local_handoff = local_handoff_bound{}}; };
static_assert(takes_local_handoff<mutex_options>);
static_assert(!takes_local_handoff<lock_options>);
static_assert(!std::is_constructible_v<shared_mutex, session&, std::string, mutex_options>);
static_assert(!std::is_constructible_v<race_mutex, session&, std::string, mutex_options>);
static_assert(!std::is_constructible_v<semaphore, session&, std::string, std::size_t, mutex_options>);
static_assert(!std::is_constructible_v<election, session&, std::string, election_mode, mutex_options>);
// Every recipe's options are a mutex's (without a bound).
static_assert(std::is_constructible_v<mutex, session&, std::string, lock_options>);

TEST_CASE("local handoff: bad options say what is wrong") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto message_of = [](auto make) {
    try {
      make();
    } catch (const zkasio::system_error& e) {
      CHECK(e.code() == std::errc::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message_of([&] { mutex m(s, "/m", handing_over(1, -1ms)); }).find("max_time is negative") !=
        std::string::npos);
}

TEST_CASE("local handoff: the observer hears each contender's acquiring, granted and released, the lock handed over under one node") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("local-observer");
  observer_log log;
  auto options = handing_over();
  options.observer = log.observer();
  mutex m(s, path, std::move(options));
  log.strand = m.get_executor();
  run(io, [&]() -> awaitable<void> {
    auto first = co_await m.async_acquire(use_awaitable);
    auto node = first.node();
    auto czxid = first.fencing_token().czxid;
    auto waiting = start_acquires(io, m, 1);
    auto& next = *waiting.front();
    // The waiter has started (it waits in this process: no node of its own).
    REQUIRE(co_await eventually([&] { return log.events.size() == 3; }));
    CHECK((co_await lock_nodes(s, path)).size() == 1);
    asio::steady_timer pause(io, 20ms);
    co_await pause.async_wait(use_awaitable);
    co_await first.async_release(use_awaitable);
    REQUIRE(co_await granted(next));
    CHECK(next.held.node() == node);
    CHECK(next.held.fencing_token() == fence_token{czxid, 1});
    co_await next.held.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0));
    auto& heard = log.events;
    REQUIRE(log.sequence() == "acquiring granted acquiring released granted released");
    for (auto& event : heard) CHECK(event.path == path);
    CHECK(heard[1].node == node);
    CHECK(heard[3].node == node);  // the first's grant, held at least the pause
    CHECK(heard[3].took >= 20ms);
    CHECK(heard[4].node == node);  // the next's, handed over in memory: the same node
    CHECK(heard[4].took >= 20ms);  // it waited since its acquiring, the pause included
    CHECK_FALSE(heard[4].error);
    CHECK(heard[5].node == node);
  }());
  CHECK(log.on_strand);
}
