// Access control against a real server: with digest authentication, every
// recipe's nodes (and the lock path it creates) carry the creator's ACL, so
// another identity (no authentication, other credentials, a wrong password)
// reads the queue but can neither delete, revoke nor queue; the holder still
// releases; the identity survives an expiry.
#include <doctest/doctest.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
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

namespace {

// Sessions on the shared server: two with alice's identity, one without
// authentication, one with alice's name and a wrong password (in ZooKeeper
// not a failed login: another identity).
struct identities {
  asio::io_context io;
  session alice{io, test_options(shared_hosts())};
  session alice_again{io, test_options(shared_hosts())};
  session nobody{io, test_options(shared_hosts())};
  session wrong_password{io, test_options(shared_hosts())};

  awaitable<void> authenticate() {
    co_await alice.async_add_auth("digest", "alice:secret", use_awaitable);
    co_await alice_again.async_add_auth("digest", "alice:secret", use_awaitable);
    co_await wrong_password.async_add_auth("digest", "alice:wrong", use_awaitable);
    CHECK(alice.authenticated());
    CHECK_FALSE(nobody.authenticated());
  }
};

// What `other` can do to `node`, a holder's node whose parent is `dir`: read
// it and the queue, nothing else.
awaitable<void> shut_out(session& other, std::string dir, std::string node) {
  CAPTURE(node);
  auto [list_ec, kids] = co_await other.async_get_children(dir, as_tuple(use_awaitable));
  CHECK_FALSE(list_ec);
  CHECK_FALSE(kids.names.empty());
  auto [read_ec, data] = co_await other.async_get_data(node, as_tuple(use_awaitable));
  CHECK_FALSE(read_ec);
  CHECK(co_await error_of([&](auto t) { return other.async_remove(node, t); }) == zk_error::no_auth);
  // Curator's revocation is a write into the node.
  CHECK(co_await error_of([&](auto t) { return other.async_set_data(node, "__REVOKE__", t); }) == zk_error::no_auth);
  CHECK(co_await error_of([&](auto t) { return other.async_create(dir + "/intruder", "", t); }) == zk_error::no_auth);
}

// The holder's lost signal has not fired, it releases, and its node is gone.
awaitable<void> released_untouched(session& s, lock held, lost_signal_log& lost) {
  CHECK_FALSE(lost.fired.happened());
  auto node = held.node();
  co_await held.async_release(use_awaitable);
  CHECK_FALSE((co_await s.async_exists(node, use_awaitable)).has_value());
}

}  // namespace

TEST_CASE_FIXTURE(identities, "mutex: another identity reads the queue, but neither deletes, revokes nor queues; the holder releases") {
  auto path = unique_path("acl-mutex");
  mutex m(alice, path), m_again(alice_again, path), m_nobody(nobody, path), m_wrong(wrong_password, path);
  run(io, [&]() -> awaitable<void> {
    co_await authenticate();
    auto held = co_await m.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(held);
    for (session* other : {&nobody, &wrong_password}) co_await shut_out(*other, path, held.node());
    CHECK(co_await error_of([&](auto t) { return m_nobody.async_revoke(held.node(), t); }) == zk_error::no_auth);
    CHECK(co_await error_of([&](auto t) { return m_nobody.async_acquire(t); }) == zk_error::no_auth);
    // The exception says what a wrong password looks like.
    try {
      auto never = co_await m_wrong.async_acquire(use_awaitable);
      FAIL("granted to another identity: " << never.node());
    } catch (const zkasio::system_error& e) {
      CHECK(e.code() == zk_error::no_auth);
      CHECK(std::string(e.what()).find("wrong digest password") != std::string::npos);
    }
    CHECK((co_await lock_nodes(alice, path)).size() == 1);  // nothing queued by them
    // The same identity on another session queues, and is granted in turn.
    acquire_outcome next(io);
    m_again.async_acquire(next.handler());
    REQUIRE(co_await settles_at(alice, path, 2));
    co_await released_untouched(alice, std::move(held), lost);
    REQUIRE(co_await next.done.wait(10s));
    CHECK_FALSE(*next.ec);
    co_await next.held.async_release(use_awaitable);
    CHECK(co_await settles_at(alice, path, 0));
  }());
}

TEST_CASE_FIXTURE(identities, "shared_mutex, semaphore, race_mutex: another identity can neither touch a holder's node nor queue") {
  auto base = unique_path("acl-recipes");
  run(io, [&]() -> awaitable<void> {
    co_await authenticate();
    {
      auto path = base + "/shared";
      shared_mutex m(alice, path), m_nobody(nobody, path);
      auto reader = co_await m.async_acquire_shared(use_awaitable);
      lost_signal_log lost(io);
      lost.watch(reader);
      co_await shut_out(nobody, path, reader.node());
      CHECK(co_await error_of([&](auto t) { return m_nobody.async_acquire_shared(t); }) == zk_error::no_auth);
      CHECK(co_await error_of([&](auto t) { return m_nobody.async_acquire(t); }) == zk_error::no_auth);
      co_await released_untouched(alice, std::move(reader), lost);
    }
    {
      auto path = base + "/semaphore";
      semaphore sem(alice, path, 2), sem_nobody(nobody, path, 2);
      auto lease = co_await sem.async_acquire(use_awaitable);
      lost_signal_log lost(io);
      lost.watch(lease);
      co_await shut_out(nobody, path + "/leases", lease.node());
      CHECK(co_await error_of([&](auto t) { return sem_nobody.async_acquire(t); }) == zk_error::no_auth);
      CHECK(co_await settles_at(alice, path + "/locks", 0));  // its mutex: nothing left
      co_await released_untouched(alice, std::move(lease), lost);
    }
    {
      // The race node is the path itself: its parent is what protects it.
      auto path = base + "/race/holder";
      race_mutex m(alice, path), m_nobody(nobody, path);
      auto held = co_await m.async_acquire(use_awaitable);
      lost_signal_log lost(io);
      lost.watch(held);
      co_await shut_out(nobody, base + "/race", held.node());
      CHECK(co_await error_of([&](auto t) { return m_nobody.async_try_acquire(t); }) == zk_error::no_auth);
      co_await released_untouched(alice, std::move(held), lost);
    }
  }());
}

TEST_CASE_FIXTURE(identities, "node_acl chosen by the caller: open_acl_unsafe lets anyone delete the holder's node, and its lost signal fires") {
  auto path = unique_path("acl-open");
  mutex m(alice, path, {.node_acl = open_acl_unsafe()});
  run(io, [&]() -> awaitable<void> {
    co_await authenticate();
    auto held = co_await m.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(held);
    co_await nobody.async_remove(held.node(), use_awaitable);
    CHECK(co_await lost.fired.wait(10s));
    auto [ec] = co_await held.async_release(as_tuple(use_awaitable));
    CHECK(ec == error::lock_lost);
  }());
}

TEST_CASE_FIXTURE(identities, "without authentication, the nodes are open to all (ZooKeeper's default)") {
  auto path = unique_path("acl-none");
  mutex m(nobody, path), m_other(wrong_password, path);
  run(io, [&]() -> awaitable<void> {
    co_await authenticate();
    auto held = co_await m.async_acquire(use_awaitable);
    acquire_outcome next(io);
    m_other.async_acquire(next.handler());
    REQUIRE(co_await settles_at(nobody, path, 2));
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await next.done.wait(10s));
    CHECK_FALSE(*next.ec);
    co_await next.held.async_release(use_awaitable);
  }());
}

TEST_CASE_FIXTURE(proxied_server, "the session after an expiry has its identity again: its nodes are protected as before") {
  session s(io, test_options(proxy.address(), 1s));
  session nobody(io, test_options(servers.hosts()));
  mutex m(s, "/acl-expiry");
  run(io, [&]() -> awaitable<void> {
    co_await s.async_add_auth("digest", "alice:secret", use_awaitable);
    co_await s.async_create("/acl-expiry-marker", "", create_options(create_mode::ephemeral), use_awaitable);
    auto generation = s.generation();
    // Cut off until the server has expired the session (its ephemeral node goes).
    proxy.refuse_connections(true);
    proxy.drop_now();
    auto [expired_ec] = co_await nobody.async_wait_deleted("/acl-expiry-marker", as_tuple(use_awaitable));
    REQUIRE_FALSE(expired_ec);
    proxy.refuse_connections(false);
    co_await s.async_connect(use_awaitable);
    REQUIRE(s.generation() > generation);
    // Without its identity the create would fail (invalid_acl: "auth" with no
    // authenticated id); an open node would let anyone delete it.
    auto held = co_await m.async_acquire(use_awaitable);
    CHECK(co_await error_of([&](auto t) { return nobody.async_remove(held.node(), t); }) == zk_error::no_auth);
    co_await held.async_release(use_awaitable);
  }(), 30s);
}

TEST_CASE_FIXTURE(identities, "an ACL of three entries reaches the server whole (more than a create sends without an allocation)") {
  // Each entry gives something: the first lets anyone read, the second the
  // creator do anything, the third (by address) a session without
  // authentication write. Without the third, that write would be refused;
  // no entry lets it create a child.
  auto node = unique_path("acl-three");
  const acl three{{perm::read, "world", "anyone"}, {perm::all, "auth", ""}, {perm::write, "ip", "127.0.0.1"}};
  run(io, [&]() -> awaitable<void> {
    co_await authenticate();
    co_await alice.async_create(node, "", create_options(create_mode::persistent, three), use_awaitable);
    CHECK_FALSE(std::get<0>(co_await nobody.async_get_data(node, as_tuple(use_awaitable))));
    CHECK_FALSE(std::get<0>(co_await nobody.async_set_data(node, "by address", as_tuple(use_awaitable))));
    CHECK(co_await error_of([&](auto t) { return nobody.async_create(node + "/child", "", t); }) == zk_error::no_auth);
    co_await alice.async_remove(node, use_awaitable);
  }());
}
