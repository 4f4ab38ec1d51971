// zkasio::semaphore against a real server: never more than N leases, N
// reached, several leases at once, FIFO, bad counts, and nothing left after
// cancellation, timeouts and expiry.
#include <doctest/doctest.h>
#include <zookeeper/proto.h>
#include <zookeeper/zookeeper.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <zkasio/semaphore.hpp>

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

namespace {

// The semaphore's nodes: its leases and its mutex's.
asio::awaitable<std::size_t> children_of(session& s, std::string path) {
  auto [ec, kids] = co_await s.async_get_children(path, as_tuple(use_awaitable));
  co_return ec ? 0 : kids.names.size();
}
asio::awaitable<bool> nothing_left(session& s, std::string path) {
  co_return co_await settles_at(s, path + "/leases", 0, 10s, queue_family::semaphore) &&
      co_await settles_at(s, path + "/locks", 0, 10s);
}

}  // namespace

TEST_CASE("never more than N leases among 100 coroutines over 8 sessions, and N reached") {
  asio::io_context io;
  constexpr std::size_t leases = 3;
  objects_over_sessions<semaphore> semaphores(io, "semaphore-limit", 8, leases);
  constexpr int contenders = 100, rounds = 5;
  std::size_t holding = 0, most = 0;
  int grants = 0;
  auto contender = [&](semaphore& sem) -> awaitable<void> {
    asio::steady_timer hold(co_await asio::this_coro::executor);
    for (int i = 0; i < rounds; ++i) {
      auto lease = co_await sem.async_acquire(use_awaitable);
      most = std::max(most, ++holding);
      ++grants;
      hold.expires_after(30ms);  // held a while, so that N hold at once
      co_await hold.async_wait(use_awaitable);
      --holding;
      co_await lease.async_release(use_awaitable);
    }
  };
  CHECK(run_coroutines(io, contenders, [&](int i) { return contender(semaphores[i]); }, 600s) == 0);
  CHECK(grants == contenders * rounds);
  CHECK(most == leases);
  run(io, [&]() -> awaitable<void> { CHECK(co_await nothing_left(semaphores.first_session(), semaphores.path)); }());
}

TEST_CASE("several leases at once, all or nothing; waiters served in order") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts())), c(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-many");
  semaphore sa(a, path, 3), sb(b, path, 3), sc(c, path, 3);
  run(io, [&]() -> awaitable<void> {
    auto two = co_await sa.async_acquire_many(2, use_awaitable);
    REQUIRE(two.size() == 2);
    CHECK(two[0].node() != two[1].node());
    int order = 0, b_granted = 0, c_granted = 0;
    std::vector<lock> b_leases;
    lock c_lease;
    test_event b_done(io.get_executor()), c_done(io.get_executor());
    // B wants two: one is free, so it waits (holding the semaphore's mutex).
    sb.async_acquire_many(2, [&](zkasio::error_code ec, std::vector<lock> held) {
      CHECK(!ec);
      b_granted = ++order;
      b_leases = std::move(held);
      b_done.count();
    });
    REQUIRE(co_await settles_at(a, path + "/locks", 1));
    REQUIRE(co_await settles_at(a, path + "/leases", 4, 10s, queue_family::semaphore));
    // C wants one, which is free: but B came first.
    sc.async_acquire([&](zkasio::error_code ec, lock held) {
      CHECK(!ec);
      c_granted = ++order;
      c_lease = std::move(held);
      c_done.count();
    });
    REQUIRE(co_await settles_at(a, path + "/locks", 2));
    CHECK(!b_done.happened());
    CHECK(!c_done.happened());
    for (auto& l : two) co_await l.async_release(use_awaitable);
    REQUIRE(co_await b_done.wait(10s));
    REQUIRE(co_await c_done.wait(10s));
    CHECK(b_granted < c_granted);
    CHECK(b_leases.size() == 2);
    CHECK(c_lease.held());
    CHECK(co_await children_of(a, path + "/leases") == 3);
    for (auto& l : b_leases) co_await l.async_release(use_awaitable);
    co_await c_lease.async_release(use_awaitable);
    CHECK(co_await nothing_left(a, path));
  }());
}

TEST_CASE("bad counts and paths say what is wrong") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-bad");
  CHECK_THROWS_AS(semaphore(s, path, 0), std::invalid_argument);
  CHECK_THROWS_AS(semaphore(s, "no-slash", 2), zkasio::system_error);
  semaphore sem(s, path, 2);
  CHECK(sem.path() == path);
  CHECK(sem.max_leases() == 2);
  run(io, [&]() -> awaitable<void> {
    for (std::size_t count : {std::size_t{0}, std::size_t{3}}) {
      auto [ec, held] = co_await sem.async_acquire_many(count, as_tuple(use_awaitable));
      CHECK(ec == error::invalid_lease_count);
      CHECK(ec == condition::caller_fault);
      CHECK(held.empty());
    }
    CHECK(co_await nothing_left(s, path));
  }());
}

TEST_CASE("try, timeouts and cancellation leave no node behind") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-cancel");
  semaphore sa(a, path, 1), sb(b, path, 1);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await sa.async_acquire(use_awaitable);
    co_await b.async_connect(use_awaitable);  // a try is one look: not_connected while b connects
    auto [busy, l1] = co_await sb.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy == error::lock_busy);
    CHECK(co_await children_of(a, path + "/leases") == 1);
    auto [late, l2] = co_await sb.async_acquire_for(200ms, as_tuple(use_awaitable));
    CHECK(late == error::lock_timeout);
    auto [late_many, l3] = co_await sb.async_acquire_many_until(1, std::chrono::steady_clock::now() + 200ms,
                                                                 as_tuple(use_awaitable));
    CHECK(late_many == error::lock_timeout);
    for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
      asio::cancellation_signal cancel;
      acquire_outcome waiting(io);
      sb.async_acquire(asio::bind_cancellation_slot(cancel.slot(), waiting.handler()));
      REQUIRE(co_await settles_at(a, path + "/leases", 2, 10s, queue_family::semaphore));
      cancel.emit(type);
      REQUIRE(co_await waiting.done.wait(5s));
      CHECK(*waiting.ec == asio::error::operation_aborted);
      CHECK(co_await settles_at(a, path + "/leases", 1, 10s, queue_family::semaphore));
      CHECK(co_await settles_at(a, path + "/locks", 0));
    }
    co_await held.async_release(use_awaitable);
    auto again = co_await sb.async_try_acquire(use_awaitable);
    CHECK(again.held());
    co_await again.async_release(use_awaitable);
    CHECK(co_await nothing_left(a, path));
  }());
}

TEST_CASE("deadlines that strike at every step of an acquire (its mutex, its lease's create, its wait for room) leave no node behind") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-deadline-steps");
  semaphore sa(a, path, 1), sb(b, path, 2);  // sb counts two: the lease made, it waits for room behind sa's
  run(io, [&]() -> awaitable<void> {
    auto held = co_await sa.async_acquire(use_awaitable);
    auto other = co_await sb.async_acquire(use_awaitable);  // the room left: none
    co_await b.async_connect(use_awaitable);
    // A round trip here is a few hundred microseconds: the deadlines fall
    // on the mutex's acquire, the lease's create, the listing, the watch.
    for (int i = 0; i < 60; ++i) {
      auto [ec, l] = co_await sb.async_acquire_for(std::chrono::microseconds(i * 97), as_tuple(use_awaitable));
      CHECK_MESSAGE(ec == error::lock_timeout, "deadline " << i * 97 << " us: " << ec.message());
    }
    CHECK(co_await settles_at(a, path + "/leases", 2, 10s, queue_family::semaphore));
    CHECK(co_await settles_at(a, path + "/locks", 0));
    co_await held.async_release(use_awaitable);
    auto again = co_await sb.async_acquire_for(10s, use_awaitable);
    CHECK(again.held());
    co_await again.async_release(use_awaitable);
    co_await other.async_release(use_awaitable);
    CHECK(co_await nothing_left(a, path));
  }());
}

TEST_CASE_FIXTURE(proxied_server, "a lease holder's session expires: its lost signal fires and the waiter gets the lease") {
  session cut_off(io, test_options(proxy.address(), 1s));
  session direct(io, test_options(servers.hosts(), 10s));
  semaphore s_cut(cut_off, "/sem", 1), s_direct(direct, "/sem", 1);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await s_cut.async_acquire(use_awaitable);
    acquire_outcome waiter(io);
    s_direct.async_acquire(waiter.handler());
    REQUIRE(co_await settles_at(direct, "/sem/leases", 2, 10s, queue_family::semaphore));
    co_await holder_expires(*this, held, waiter);
    CHECK(co_await nothing_left(direct, "/sem"));
  }(), 30s);
}

// The acquirer's mutex lost while it waits for room: its lease nodes go and
// it queues again for the mutex, within its deadline; it held no lease, so
// nothing is lost to the caller (before: lock_lost). Never two acquirers
// waiting for room, each counting the other's leases.
namespace {

// Once the acquirer whose mutex node was `old_guard` and whose lease was
// `old_lease` queued again: a mutex node of another name, and two leases
// (the holder's and its new one) but not the old.
awaitable<bool> queued_again(session& s, std::string path, std::string old_guard, std::string old_lease) {
  // (A closure capturing by reference: g++ 12 destroys a closure argument
  // of a co_await twice, which its copied strings would not survive.)
  co_return co_await eventually_async([&]() -> awaitable<bool> {
    auto guards = co_await lock_nodes(s, path + "/locks");
    auto leases = co_await lock_nodes(s, path + "/leases", queue_family::semaphore);
    co_return guards.size() == 1 && guards[0] != old_guard && leases.size() == 2 &&
        std::find(leases.begin(), leases.end(), old_lease) == leases.end();
  });
}

}  // namespace

TEST_CASE("the semaphore's mutex node deleted while its holder waits for room: it queues again and is granted") {
  asio::io_context io;
  session h(io, test_options(shared_hosts())), a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-guard-deleted");
  semaphore sh(h, path, 1), sa(a, path, 1), sb(b, path, 1);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await sh.async_acquire(use_awaitable);
    acquire_outcome waiting(io), next(io);
    sa.async_acquire(waiting.handler());
    REQUIRE(co_await settles_at(h, path + "/leases", 2, 10s, queue_family::semaphore));
    // An operator deletes the mutex node of the acquirer waiting for room.
    auto guards = co_await lock_nodes(h, path + "/locks");
    REQUIRE(guards.size() == 1);
    auto leases = co_await lock_nodes(h, path + "/leases", queue_family::semaphore);
    auto its_lease = leases[0] == held.node().substr(path.size() + 8) ? leases[1] : leases[0];
    co_await h.async_remove(path + "/locks/" + guards[0], use_awaitable);
    REQUIRE(co_await queued_again(h, path, guards[0], its_lease));
    CHECK_FALSE(waiting.done.happened());
    sb.async_acquire(next.handler());  // behind it
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await waiting.done.wait(10s));
    CHECK(!*waiting.ec);
    CHECK_FALSE(next.done.happened());
    co_await waiting.held.async_release(use_awaitable);
    REQUIRE(co_await next.done.wait(10s));
    CHECK(!*next.ec);
    co_await next.held.async_release(use_awaitable);
    CHECK(co_await nothing_left(h, path));
  }());
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "the semaphore's mutex lost while its holder lists the leases again: it queues again and is granted") {
  semaphore s_holder(holder, "/sem", 1), s_waiter(s, "/sem", 1);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await s_holder.async_acquire(use_awaitable);
    acquire_outcome waiting(io);
    s_waiter.async_acquire(waiting.handler());
    REQUIRE(co_await settles_at(holder, "/sem/locks", 1));
    auto guard = (co_await lock_nodes(holder, "/sem/locks")).front();
    // It waits for room: three watches, the holder's on its lease, the
    // waiter's on its mutex node and on the leases' children.
    REQUIRE(co_await eventually([&] { return watch_count(servers.host(1)) == 3; }));
    auto leases = co_await lock_nodes(holder, "/sem/leases", queue_family::semaphore);
    REQUIRE(leases.size() == 2);
    // Two events reach it together: the leases changed (it lists them again),
    // then its mutex node is deleted, so the loss comes while it lists.
    proxy.hold_replies();
    co_await holder.async_create("/sem/leases/an-operators-node", "", use_awaitable);
    co_await holder.async_remove("/sem/locks/" + guard, use_awaitable);
    REQUIRE(co_await eventually([&] { return proxy.wait_held_events(2, 0ms); }));
    proxy.pass();
    // It queues again: a new mutex node; its lease (the second) made anew.
    REQUIRE(co_await eventually_async([&]() -> awaitable<bool> {
      auto guards = co_await lock_nodes(holder, "/sem/locks");
      co_return guards.size() == 1 && guards[0] != guard;
    }));
    co_await holder.async_remove("/sem/leases/an-operators-node", use_awaitable);
    CHECK_FALSE(waiting.done.happened());
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await waiting.done.wait(10s));
    CHECK(!*waiting.ec);
    CHECK(waiting.held.node() != "/sem/leases/" + leases[1]);
    co_await waiting.held.async_release(use_awaitable);
    CHECK(co_await nothing_left(holder, "/sem"));
  }(), 30s);
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "a waiter for room cancelled while it pauses before listing a busy server's leases again ends then; its lease and its mutex node go") {
  semaphore s_holder(holder, "/sem-busy", 1), s_waiter(s, "/sem-busy", 1);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await s_holder.async_acquire(use_awaitable);
    asio::cancellation_signal cancel;
    acquire_outcome waiting(io);
    s_waiter.async_acquire(asio::bind_cancellation_slot(cancel.slot(), waiting.handler()));
    // It waits for room: three watches (see above).
    REQUIRE(co_await eventually([&] { return watch_count(servers.host(1)) == 3; }));
    // The leases change (an operator's node: still no room); each listing
    // it asks for then is answered busy, and it pauses before the next.
    auto listings = proxy.requests_forwarded(ZOO_GETCHILDREN2_OP);
    proxy.fail_replies(ZOO_GETCHILDREN2_OP, ZTHROTTLEDOP, 1000);
    co_await holder.async_create("/sem-busy/leases/an-operators-node", "", use_awaitable);
    REQUIRE(co_await eventually([&] { return proxy.requests_forwarded(ZOO_GETCHILDREN2_OP) >= listings + 4; }, 10s));
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await waiting.done.wait(5s));
    CHECK(*waiting.ec == asio::error::operation_aborted);
    proxy.fail_replies(ZOO_GETCHILDREN2_OP, ZTHROTTLEDOP, 0);
    co_await holder.async_remove("/sem-busy/leases/an-operators-node", use_awaitable);
    CHECK(co_await settles_at(holder, "/sem-busy/leases", 1, 10s, queue_family::semaphore));  // the holder's
    CHECK(co_await settles_at(holder, "/sem-busy/locks", 0));
    co_await held.async_release(use_awaitable);
    CHECK(co_await nothing_left(holder, "/sem-busy"));
  }(), 30s);
}

// A waiter that holds no lease rides through a disconnection that its
// session survives, under either policy, though its mutex's hold is lost
// meanwhile (before: lock_lost, "the lock was lost", to a caller that held
// nothing).
TEST_CASE_FIXTURE(proxied_server, "a waiter rides through a disconnection its session survives though the semaphore's mutex may be lost meanwhile") {
  for (auto policy : {lost_policy::on_suspend, lost_policy::before_expiry}) {
    CAPTURE(static_cast<int>(policy));
    auto path = unique_path("semaphore-ride-mutex");
    session holder(io, test_options(servers.hosts(), 10s));
    // A 6 s session whose hold may be lost 3 s after the server's last sight
    // of it (before_expiry), or at once (on_suspend).
    session cut(io, test_options(proxy.address(), 6s));
    semaphore s_holder(holder, path, 1), s_waiter(cut, path, 1, {.policy = policy, .safety_margin = 3s});
    run(io, [&]() -> awaitable<void> {
      auto held = co_await s_holder.async_acquire(use_awaitable);
      co_await cut.async_exists("/", use_awaitable);
      auto generation = cut.generation();
      acquire_outcome waiting(io);
      s_waiter.async_acquire(waiting.handler());
      REQUIRE(co_await settles_at(holder, path + "/leases", 2, 10s, queue_family::semaphore));
      auto guard = (co_await lock_nodes(holder, path + "/locks")).front();
      proxy.refuse_connections(true);
      proxy.drop_now();
      REQUIRE(co_await eventually([&] { return cut.state() == session_state::suspended; }));
      // Past the policy's moment (the hold may be lost), within the session.
      auto lost_by = cut.last_contact() + cut.negotiated_timeout() - 3s + 300ms;
      asio::steady_timer past(io, policy == lost_policy::on_suspend ? std::chrono::steady_clock::now() : lost_by);
      co_await past.async_wait(use_awaitable);
      proxy.refuse_connections(false);
      REQUIRE(co_await eventually_async([&]() -> awaitable<bool> {
        auto guards = co_await lock_nodes(holder, path + "/locks");
        co_return guards.size() == 1 && guards[0] != guard;
      }));
      CHECK_FALSE(waiting.done.happened());
      co_await held.async_release(use_awaitable);
      REQUIRE(co_await waiting.done.wait(10s));
      CHECK(!*waiting.ec);
      CHECK(cut.generation() == generation);
      co_await waiting.held.async_release(use_awaitable);
      CHECK(co_await nothing_left(holder, path));
    }(), 40s);
  }
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "an acquirer waiting for room rides through lost connections that its session survives: the watch cut, then the listing's reply lost") {
  semaphore s_holder(holder, "/sem-ride", 1), s_waiter(s, "/sem-ride", 1);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await s_holder.async_acquire(use_awaitable);
    auto generation = co_await waiter_connected();
    acquire_outcome waiting(io);
    s_waiter.async_acquire(waiting.handler());
    // It waits for room: the holder's watch on its lease, the waiter's on its
    // mutex node and on the leases' children.
    REQUIRE(co_await eventually([&] { return watch_count(servers.host(1)) == 3; }));
    proxy.drop_now();  // the watch on the leases is cut
    REQUIRE(co_await eventually([&] { return proxy.connections_accepted() >= 2 && watch_count(servers.host(1)) == 3; }));
    // Woken by the release, it lists the leases: that reply is lost with the connection.
    proxy.arm_cut(tcp_proxy::cut::lose_reply, ZOO_GETCHILDREN2_OP);
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await eventually([&] { return proxy.wait_cut(0ms); }, 5s));
    co_await rode_through(waiting, generation);
    co_await waiting.held.async_release(use_awaitable);
    CHECK(co_await nothing_left(holder, "/sem-ride"));
  }(), 30s);
}

TEST_CASE("a cancellation that comes before the operation has run: operation_aborted, nothing created") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-cancel-first");
  semaphore sem(s, path, 1);
  run(io, [&]() -> awaitable<void> {
    co_await s.async_connect(use_awaitable);
    asio::cancellation_signal cancel;
    acquire_outcome attempt(io);
    // Emitted on the semaphore's strand before the acquire's coroutine runs there.
    asio::post(sem.get_executor(), [&] { cancel.emit(asio::cancellation_type::terminal); });
    sem.async_acquire(asio::bind_cancellation_slot(cancel.slot(), attempt.handler()));
    REQUIRE(co_await attempt.done.wait(5s));
    CHECK(*attempt.ec == asio::error::operation_aborted);
    CHECK(co_await nothing_left(s, path));
  }());
}

// lock_event's path: "a semaphore's: its mutex's, "<path>/locks", and its
// leases'". Each acquire takes the mutex (acquiring, then granted or failed,
// released once the leases are made and there is room); each lease's grant
// ends as every grant does (lost, released). (What it hears of the lease's
// own acquire, if anything, is not documented: not checked here.)
TEST_CASE("a semaphore's observer hears each acquire of leases (granted, or failed when it timed out waiting for room) and each lease's loss and release, on its strand, and nothing of its mutex") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("semaphore-observer");
  observer_log log;
  semaphore sem(a, path, 1, {.observer = log.observer()});
  log.strand = sem.get_executor();
  semaphore rival(b, path, 1);
  run(io, [&]() -> awaitable<void> {
    auto first = co_await sem.async_acquire(use_awaitable);
    auto first_node = first.node();
    co_await first.async_release(use_awaitable);
    CHECK(co_await nothing_left(a, path));
    // No room: the acquire takes the mutex, then times out waiting for room.
    auto theirs = co_await rival.async_acquire(use_awaitable);
    auto [late, none] = co_await sem.async_acquire_for(100ms, as_tuple(use_awaitable));
    CHECK(late == error::lock_timeout);
    co_await theirs.async_release(use_awaitable);
    CHECK(co_await nothing_left(a, path));
    // A lease whose node an operator deletes.
    auto second = co_await sem.async_acquire(use_awaitable);
    auto second_node = second.node();
    co_await deleted_by_operator(b, second);
    CHECK(co_await nothing_left(a, path));

    // Each acquire: acquiring, then granted (a lease, its node) or failed
    // (the timeout: the semaphore's mutex, taken inside, is not heard);
    // each lease: released, or lost then released.
    for (auto& e : log.events) CHECK(e.path == path + "/leases");
    REQUIRE(log.sequence() == "acquiring granted released acquiring failed acquiring granted lost released");
    auto& events = log.events;
    CHECK(events[1].node == first_node);
    CHECK(events[2].node == first_node);
    CHECK(events[4].error == error::lock_timeout);
    CHECK(events[4].took >= 100ms);
    CHECK(events[6].node == second_node);
    CHECK(events[7].node == second_node);
    CHECK(events[8].node == second_node);
    CHECK(events[8].took >= events[7].took);
  }());
  CHECK(log.on_strand);
}
