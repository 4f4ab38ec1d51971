// zkasio::shared_mutex against a real server: readers share and writers
// exclude under load, the queue's order, the downgrade, reentry, and nothing
// left after cancellation, timeouts and expiry.
#include <doctest/doctest.h>
#include <zookeeper/proto.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/shared_mutex.hpp>

#include "recipes/rules/lock_queue.hpp"
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

constexpr auto read_write = queue_family::read_write;

// The holders of one lock, as they come and go: any grant against the rule
// is counted.
struct holders {
  int readers = 0, writers = 0, violations = 0, most_readers = 0, grants = 0;
  void enter(bool write) {
    ++grants;
    if (writers > 0 || (write && readers > 0)) ++violations;
    if (write) ++writers;
    else most_readers = std::max(most_readers, ++readers);
  }
  void exit(bool write) { --(write ? writers : readers); }
};

// A step counter: what happened before what.
struct steps {
  int now = 0;
  int next() { return ++now; }
};

}  // namespace

TEST_CASE("readers share and writers exclude: 100 coroutines over 8 sessions") {
  asio::io_context io;
  objects_over_sessions<shared_mutex> locks(io, "shared-mutex-exclusion", 8);
  constexpr int contenders = 100, rounds = 10;
  holders seen;
  std::vector<std::int64_t> write_tokens;
  auto contender = [&](shared_mutex& m, bool write) -> awaitable<void> {
    asio::steady_timer hold(co_await asio::this_coro::executor);
    for (int i = 0; i < rounds; ++i) {
      lock held;
      if (write) held = co_await m.async_acquire(use_awaitable);
      else held = co_await m.async_acquire_shared(use_awaitable);
      seen.enter(write);
      if (write) write_tokens.push_back(held.fencing_token().czxid);
      hold.expires_after(1ms);  // held a while, so that readers meet
      co_await hold.async_wait(use_awaitable);
      seen.exit(write);
      co_await held.async_release(use_awaitable);
    }
  };
  CHECK(run_coroutines(io, contenders, [&](int i) { return contender(locks[i], i % 5 == 0); }, 600s) == 0);
  CHECK(seen.violations == 0);
  CHECK(seen.grants == contenders * rounds);
  MESSAGE("readers at once at most: " << seen.most_readers);
  CHECK(seen.most_readers >= 2);
  CHECK(std::is_sorted(write_tokens.begin(), write_tokens.end()));
  run(io, [&]() -> awaitable<void> { CHECK((co_await lock_nodes(locks.first_session(), locks.path, read_write)).empty()); }());
}

TEST_CASE("the queue W R R W R: the readers hold together, the writer waits for both, the last reader for the writer") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts())), c(io, test_options(shared_hosts()));
  auto path = unique_path("shared-mutex-order");
  shared_mutex ma(a, path), mb(b, path), mc(c, path);
  run(io, [&]() -> awaitable<void> {
    steps clock;
    auto w1 = co_await ma.async_acquire(use_awaitable);
    acquire_outcome r2(io), r3(io), w4(io), r5(io);
    int w4_granted = 0, r5_granted = 0;
    mb.async_acquire_shared(r2.handler());
    REQUIRE(co_await settles_at(a, path, 2, 10s, read_write));
    mc.async_acquire_shared(r3.handler());
    REQUIRE(co_await settles_at(a, path, 3, 10s, read_write));
    mb.async_acquire([&, h = w4.handler()](zkasio::error_code ec, lock l) mutable {
      w4_granted = clock.next();
      h(ec, std::move(l));
    });
    REQUIRE(co_await settles_at(a, path, 4, 10s, read_write));
    mc.async_acquire_shared([&, h = r5.handler()](zkasio::error_code ec, lock l) mutable {
      r5_granted = clock.next();
      h(ec, std::move(l));
    });
    REQUIRE(co_await settles_at(a, path, 5, 10s, read_write));
    CHECK_FALSE(r2.done.happened());

    co_await w1.async_release(use_awaitable);
    REQUIRE(co_await r2.done.wait(10s));
    REQUIRE(co_await r3.done.wait(10s));
    CHECK((r2.held.held() && r3.held.held()));  // together

    // One reader goes: the writer still waits for the other (a round trip on
    // its session lets a wrong notification arrive first).
    co_await r2.held.async_release(use_awaitable);
    REQUIRE(co_await settles_at(a, path, 3, 10s, read_write));
    co_await b.async_exists("/", use_awaitable);
    auto r3_released = clock.next();
    co_await r3.held.async_release(use_awaitable);
    REQUIRE(co_await w4.done.wait(10s));
    CHECK(!*w4.ec);
    CHECK(w4_granted > r3_released);

    // The reader behind the writer waits for it.
    co_await c.async_exists("/", use_awaitable);
    auto w4_released = clock.next();
    co_await w4.held.async_release(use_awaitable);
    REQUIRE(co_await r5.done.wait(10s));
    CHECK(!*r5.ec);
    CHECK(r5_granted > w4_released);
    co_await r5.held.async_release(use_awaitable);
    CHECK(co_await settles_at(a, path, 0, 10s, read_write));
  }());
}

TEST_CASE_FIXTURE(proxied_server, "downgrade: a write holder takes the read lock at once, at its write node's place; a writer queued behind waits for both") {
  // The writer behind in this process (one knowledge of the path's nodes),
  // or as if in another (another connect string: it knows none of them).
  for (bool elsewhere : {false, true}) {
  CAPTURE(elsewhere);
  session a(io, test_options(servers.hosts())), b(io, test_options(elsewhere ? proxy.address() : servers.hosts()));
  auto path = std::string(elsewhere ? "/downgrade-elsewhere" : "/downgrade");
  shared_mutex ma(a, path), mb(b, path);
  run(io, [&]() -> awaitable<void> {
    steps clock;
    owner me;
    auto w = co_await ma.async_acquire({.who = me}, use_awaitable);
    acquire_outcome w2(io);
    int w2_granted = 0;
    mb.async_acquire([&, h = w2.handler()](zkasio::error_code ec, lock l) mutable {
      w2_granted = clock.next();
      h(ec, std::move(l));
    });
    REQUIRE(co_await settles_at(a, path, 2, 10s, read_write));
    auto r = co_await ma.async_acquire_shared({.who = me}, use_awaitable);
    CHECK(r.held());
    auto write_node = detail::parse_lock_node(w.node().substr(path.size() + 1));
    auto read_node = detail::parse_lock_node(r.node().substr(path.size() + 1));
    REQUIRE((write_node && read_node));
    CHECK(read_node->kind == detail::node_kind::read);
    CHECK(read_node->sequence == write_node->sequence);
    // The downgraded grant keeps the write grant's token: the writer queued
    // behind is granted after it with a greater one (its node is older than
    // the read node: before, the tokens went write 38, read 40, writer 39).
    CHECK(r.fencing_token() == w.fencing_token());
    auto read_token = r.fencing_token();

    // The write lock goes; the reader reads on, and the writer still waits.
    co_await w.async_release(use_awaitable);
    REQUIRE(co_await settles_at(a, path, 2, 10s, read_write));
    co_await b.async_exists("/", use_awaitable);
    auto read_released = clock.next();
    co_await r.async_release(use_awaitable);
    REQUIRE(co_await w2.done.wait(10s));
    CHECK(!*w2.ec);
    CHECK(w2_granted > read_released);
    CHECK(w2.held.fencing_token() > read_token);
    co_await w2.held.async_release(use_awaitable);
    CHECK(co_await settles_at(a, path, 0, 10s, read_write));
  }());
  }
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter, "downgrade: a check cut off by a lost connection that the session survives is asked again; the read lock is granted") {
  shared_mutex m(s, "/downgrade-ride");
  run(io, [&]() -> awaitable<void> {
    owner me;
    auto generation = co_await waiter_connected();
    auto w = co_await m.async_acquire({.who = me}, use_awaitable);
    // The downgrade checks that its write node is still there after a sync:
    // that sync's reply is lost with the connection.
    proxy.arm_cut(tcp_proxy::cut::lose_reply, ZOO_SYNC_OP);
    auto [ec, r] = co_await m.async_acquire_shared({.who = me}, as_tuple(use_awaitable));
    CHECK(proxy.wait_cut(0ms));
    CHECK_FALSE(ec);
    CHECK(r.held());
    CHECK(s.generation() == generation);
    CHECK((co_await lock_nodes(holder, "/downgrade-ride", read_write)).size() == 2);
    co_await w.async_release(use_awaitable);
    co_await r.async_release(use_awaitable);
    CHECK(co_await settles_at(holder, "/downgrade-ride", 0, 10s, read_write));
  }(), 30s);
}

TEST_CASE("reentry by owner: the same lock again shares its node; a reader asking for the write lock fails at once; a downgrade past its deadline leaves the write lock alone") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("shared-mutex-reentry");
  shared_mutex m(s, path);
  run(io, [&]() -> awaitable<void> {
    owner reader, writer;
    auto r1 = co_await m.async_acquire_shared({.who = reader}, use_awaitable);
    auto r2 = co_await m.async_acquire_shared({.who = reader}, use_awaitable);
    CHECK(r1.node() == r2.node());
    auto [ec, none] = co_await m.async_acquire({.who = reader}, as_tuple(use_awaitable));
    CHECK(ec == error::would_deadlock);
    CHECK(ec == condition::caller_fault);
    CHECK_FALSE(none.held());
    CHECK((co_await lock_nodes(s, path, read_write)).size() == 1);
    co_await r1.async_release(use_awaitable);
    co_await r2.async_release(use_awaitable);

    auto w1 = co_await m.async_acquire({.who = writer}, use_awaitable);
    auto w2 = co_await m.async_acquire({.who = writer}, use_awaitable);
    CHECK(w1.node() == w2.node());
    co_await w2.async_release(use_awaitable);
    // A downgrade whose deadline has passed at its launch: lock_timeout, its
    // read node (if made) deleted, the write lock still held.
    auto [late, unread] = co_await m.async_acquire_shared({.who = writer, .timeout = 0ms}, as_tuple(use_awaitable));
    CHECK(late == error::lock_timeout);
    CHECK_FALSE(unread.held());
    CHECK(co_await settles_at(s, path, 1, 10s, read_write));
    CHECK(w1.held());
    co_await w1.async_release(use_awaitable);
    CHECK(co_await settles_at(s, path, 0, 10s, read_write));
  }());
}

TEST_CASE("try, timeouts and cancellation of both kinds leave no node; readers try together") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("shared-mutex-cancel");
  shared_mutex ma(a, path), mb(b, path);
  run(io, [&]() -> awaitable<void> {
    auto w = co_await ma.async_acquire(use_awaitable);
    co_await b.async_connect(use_awaitable);  // a try is one look: not_connected while b connects
    auto [busy_write, l1] = co_await mb.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy_write == error::lock_busy);
    auto [busy_read, l2] = co_await mb.async_try_acquire_shared(as_tuple(use_awaitable));
    CHECK(busy_read == error::lock_busy);
    auto [late_read, l3] = co_await mb.async_acquire_shared_for(200ms, as_tuple(use_awaitable));
    CHECK(late_read == error::lock_timeout);
    auto [late_write, l4] = co_await mb.async_acquire_for(200ms, as_tuple(use_awaitable));
    CHECK(late_write == error::lock_timeout);
    for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
      asio::cancellation_signal cancel;
      acquire_outcome waiting(io);
      mb.async_acquire_shared(asio::bind_cancellation_slot(cancel.slot(), waiting.handler()));
      REQUIRE(co_await settles_at(a, path, 2, 10s, read_write));
      cancel.emit(type);
      REQUIRE(co_await waiting.done.wait(5s));
      CHECK(*waiting.ec == asio::error::operation_aborted);
      CHECK(co_await settles_at(a, path, 1, 10s, read_write));
    }
    co_await w.async_release(use_awaitable);
    CHECK(co_await settles_at(a, path, 0, 10s, read_write));

    auto r1 = co_await ma.async_try_acquire_shared(use_awaitable);
    auto r2 = co_await mb.async_try_acquire_shared(use_awaitable);
    CHECK((r1.held() && r2.held()));
    auto [busy, l5] = co_await mb.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy == error::lock_busy);
    co_await r1.async_release(use_awaitable);
    co_await r2.async_release(use_awaitable);
    CHECK(co_await settles_at(a, path, 0, 10s, read_write));
  }());
}

TEST_CASE_FIXTURE(proxied_server, "a reader's session expires: its lost signal fires and the writer behind is granted") {
  session cut_off(io, test_options(proxy.address(), 1s));
  session direct(io, test_options(servers.hosts(), 10s));
  shared_mutex m_cut(cut_off, "/rw"), m_direct(direct, "/rw");
  run(io, [&]() -> awaitable<void> {
    auto r = co_await m_cut.async_acquire_shared(use_awaitable);
    acquire_outcome w(io);
    m_direct.async_acquire(w.handler());
    REQUIRE(co_await settles_at(direct, "/rw", 2, 10s, read_write));
    co_await holder_expires(*this, r, w);
    CHECK(co_await settles_at(direct, "/rw", 0, 10s, read_write));
  }(), 30s);
}

TEST_CASE_FIXTURE(proxied_server, "a writer waiting between two readers expires: the reader behind it joins the one ahead") {
  session cut_off(io, test_options(proxy.address(), 1s));
  session direct(io, test_options(servers.hosts(), 10s)), other(io, test_options(servers.hosts(), 10s));
  shared_mutex m_cut(cut_off, "/rw"), m_direct(direct, "/rw"), m_other(other, "/rw");
  run(io, [&]() -> awaitable<void> {
    auto r1 = co_await m_direct.async_acquire_shared(use_awaitable);
    co_await cut_off.async_connect(use_awaitable);
    acquire_outcome w2(io), r3(io);
    m_cut.async_acquire(w2.handler());
    REQUIRE(co_await settles_at(direct, "/rw", 2, 10s, read_write));
    m_other.async_acquire_shared(r3.handler());
    REQUIRE(co_await settles_at(direct, "/rw", 3, 10s, read_write));
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await r3.done.wait(10s));
    CHECK(!*r3.ec);
    CHECK((r1.held() && r3.held.held()));
    proxy.refuse_connections(false);
    REQUIRE(co_await w2.done.wait(10s));
    CHECK(*w2.ec == zk_error::session_expired);
    co_await r1.async_release(use_awaitable);
    co_await r3.held.async_release(use_awaitable);
    CHECK(co_await settles_at(direct, "/rw", 0, 10s, read_write));
  }(), 30s);
}

TEST_CASE("a mutex and a shared_mutex on one path are two locks: neither waits for the other") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("shared-mutex-beside-mutex");
  mutex plain(a, path);
  shared_mutex ra(a, path), rb(b, path);
  run(io, [&]() -> awaitable<void> {
    auto m1 = co_await plain.async_acquire(use_awaitable);
    auto w2 = co_await ra.async_acquire(use_awaitable);  // the mutex's node is no writer's predecessor
    acquire_outcome w3(io);
    rb.async_acquire(w3.handler());
    REQUIRE(co_await settles_at(a, path, 2, 10s, read_write));
    co_await w2.async_release(use_awaitable);
    REQUIRE(co_await w3.done.wait(10s));  // its walk down the known nodes passes the mutex's by
    CHECK(!*w3.ec);
    CHECK(m1.held());
    co_await w3.held.async_release(use_awaitable);
    co_await m1.async_release(use_awaitable);
    CHECK(co_await settles_at(a, path, 0, 10s, read_write));
    CHECK(co_await settles_at(a, path, 0));
  }());
}
