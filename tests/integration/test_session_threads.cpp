// The session's test cases that run one io_context on several threads
// (doctest suite "threads"), those of test_session and test_session_state:
// an executable of their own, so that the ThreadSanitizer stage builds only
// these (tests/CMakeLists.txt, zkasio_threads).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <future>
#include <mutex>
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

TEST_CASE("every completion token works" * doctest::test_suite("threads")) {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("session-tokens");

  // A plain callback, run on the session's executor.
  std::optional<zkasio::error_code> callback_ec;
  s.async_create(path, "data", [&](zkasio::error_code ec, created) { callback_ec = ec; });
  REQUIRE(run_until(io, [&] { return callback_ec.has_value(); }));
  CHECK(!*callback_ec);

  // No token: zkasio::default_token, which a coroutine can co_await.
  static_assert(std::is_same_v<decltype(s.async_exists(path)), awaitable<std::optional<node_stat>>>);
  run(io, [&]() -> awaitable<void> {
    auto stat = co_await s.async_exists(path);
    CHECK(stat.has_value());
  }());

  // as_tuple
  run(io, [&]() -> awaitable<void> {
    auto [ec, data] = co_await s.async_get_data(path, asio::experimental::as_tuple(use_awaitable));
    CHECK(!ec);
    CHECK(data.data == "data");
  }());

  // deferred: nothing happens until it is started.
  auto later = s.async_get_data(path, asio::experimental::deferred);
  std::optional<node_data> deferred_result;
  std::move(later)([&](zkasio::error_code ec, node_data d) {
    CHECK(!ec);
    deferred_result = std::move(d);
  });
  REQUIRE(run_until(io, [&] { return deferred_result.has_value(); }));
  CHECK(deferred_result->data == "data");

  // use_future, from another thread while the io_context runs.
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto future = s.async_exists(path, asio::use_future);
  REQUIRE(future.wait_for(10s) == std::future_status::ready);
  CHECK(future.get().has_value());
  // A failure through use_future with a function: its result, not an
  // exception. (An exception that crosses threads through the future is
  // reference-counted inside libstdc++, which ThreadSanitizer cannot see:
  // it reports a race between this thread's reading and the freeing on the
  // thread that drops the promise.)
  auto failing = s.async_get_data(path + "/missing",
                                  asio::use_future([](zkasio::error_code ec, node_data) { return ec; }));
  REQUIRE(failing.wait_for(10s) == std::future_status::ready);
  CHECK(failing.get() == zk_error::no_node);
  work.reset();
  auto closed = s.async_close(asio::use_future);
  REQUIRE(closed.wait_for(10s) == std::future_status::ready);
  io.stop();
  runner.join();
}

TEST_CASE("completions of one session run in the order of its requests, on a strand, with threads" * doctest::test_suite("threads")) {
  // What zkasio::mutex relies on (see send_create in src/recipes/engine/acquire_runner.cpp): a create
  // submitted, then a listing posted to the same strand and submitted from
  // there: the create's handler runs first, and the listing shows the node.
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { io.run(); });
  session s(io, test_options(shared_hosts()));
  s.async_connect(asio::use_future).get();
  auto path = unique_path("order");
  s.async_create(path, "", asio::use_future).get();
  auto strand = asio::make_strand(io);
  constexpr int rounds = 300;
  std::mutex guard;
  std::vector<std::string> names(rounds);
  int out_of_order = 0, unseen = 0, finished = 0;
  std::promise<void> all_done;
  for (int i = 0; i < rounds; ++i) {
    asio::post(strand, [&, i] {
      s.async_create(path + "/n-", "", create_options(create_mode::ephemeral_sequential),
                     asio::bind_executor(strand, [&, i](zkasio::error_code, created made) {
                       std::lock_guard lock(guard);
                       names[i] = made.path.substr(path.size() + 1);
                     }));
      asio::post(strand, [&, i] {
        s.async_get_children(path, asio::bind_executor(strand, [&, i](zkasio::error_code, children kids) {
          std::lock_guard lock(guard);
          if (names[i].empty()) ++out_of_order;
          else if (std::find(kids.names.begin(), kids.names.end(), names[i]) == kids.names.end()) ++unseen;
          if (++finished == rounds) all_done.set_value();
        }));
      });
    });
  }
  REQUIRE(all_done.get_future().wait_for(60s) == std::future_status::ready);
  CHECK(out_of_order == 0);
  CHECK(unseen == 0);
  s.async_close(asio::use_future).get();
  work.reset();
  for (auto& t : threads) t.join();
}

TEST_CASE_FIXTURE(proxied_session, "session expiry: pending operations fail, a new session starts, generation counts" * doctest::test_suite("threads")) {
  run(io, [&]() -> awaitable<void> {
    co_await s.async_create("/mine", "", create_options{create_mode::ephemeral}, use_awaitable);
    co_await observer.async_create("/theirs", "", use_awaitable);
    auto first_id = s.id();
    std::optional<zkasio::error_code> pending;
    test_event failed(io.get_executor());
    s.async_wait_deleted("/theirs", [&](zkasio::error_code ec) {
      pending = ec;
      failed.count();
    });
    co_await s.async_exists("/theirs", use_awaitable);

    // Another thread watches the state and the generation throughout: a
    // session that will reconnect counts its new generation before it says
    // expired, so expired is never seen with the old one (the lock engine
    // relies on it to requeue waiters, decisions.hpp's queues_again).
    // Nor is the old session's id seen with the new generation: the id is
    // 0 until the new session's handshake (the race recipes rely on it to
    // tell their node, race_run.cpp's look).
    std::atomic<bool> watching{true}, expired_with_old_generation{false}, new_generation_with_old_id{false};
    std::thread watcher([&] {
      while (watching.load()) {
        if (s.state() == session_state::expired && s.generation() == 0) expired_with_old_generation = true;
        if (s.generation() == 1 && s.id() == first_id) new_generation_with_old_id = true;
      }
    });
    struct stop_watching {
      std::atomic<bool>& watching;
      std::thread& watcher;
      ~stop_watching() {
        watching = false;
        watcher.join();
      }
    } stop{watching, watcher};

    // Cut the client off until the server expires its session (the ephemeral
    // node goes), then let it back.
    proxy.refuse_connections(true);
    proxy.drop_now();
    co_await observer.async_wait_deleted("/mine", use_awaitable);
    proxy.refuse_connections(false);

    CHECK(co_await failed.wait());
    REQUIRE(pending.has_value());
    CHECK(*pending == zk_error::session_expired);
    CHECK(*pending == condition::session_gone);
    co_await s.async_connect(use_awaitable);
    CHECK(s.generation() == 1);
    CHECK_FALSE(expired_with_old_generation.load());
    CHECK_FALSE(new_generation_with_old_id.load());
    CHECK(s.id() != first_id);
    // The new session works.
    co_await s.async_create("/mine", "", create_options{create_mode::ephemeral}, use_awaitable);
  }());
}

TEST_CASE("one session used from four threads" * doctest::test_suite("threads")) {
  asio::io_context io;
  session s(io, test_options(shared_hosts(), 10s));
  const std::string dir = "/threads-" + std::to_string(getpid());
  run(io, s.async_create(dir, "", use_awaitable));
  std::atomic<int> done{0}, failures{0};
  auto worker = [&](int id) -> awaitable<void> {
    auto base = dir + "/w" + std::to_string(id);
    for (int i = 0; i < 50; ++i) {
      auto path = base + "-" + std::to_string(i);
      co_await s.async_create(path, "v", use_awaitable);
      auto d = co_await s.async_get_data(path, use_awaitable);
      if (d.data != "v") ++failures;
      co_await s.async_set_data(path, "w", use_awaitable);
      asio::steady_timer timer(co_await asio::this_coro::executor, 1ms);
      co_await (s.async_wait_deleted(path, use_awaitable) || timer.async_wait(use_awaitable));
      co_await s.async_remove(path, use_awaitable);
    }
  };
  // Bounded: the guard stops the threads if the workers do not finish.
  asio::steady_timer guard(io, 60s);
  guard.async_wait([&](zkasio::error_code ec) {
    if (!ec) io.stop();
  });
  for (int i = 0; i < 8; ++i)
    asio::co_spawn(io, worker(i), [&](std::exception_ptr e) {
      if (e) ++failures;
      if (++done == 8) guard.cancel(), io.stop();
    });
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { io.run(); });
  for (auto& t : threads) t.join();
  CHECK(done == 8);
  CHECK(failures == 0);
  io.restart();
  run(io, s.async_remove(dir, use_awaitable));
}
