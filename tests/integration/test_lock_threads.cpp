// The lock tests that run one io_context on several threads (doctest suite
// "threads"), those of test_local_handoff and test_lock_safety: an
// executable of their own, so that the ThreadSanitizer stage builds only
// these (tests/CMakeLists.txt, zkasio_threads).
#include <doctest/doctest.h>
#include <zookeeper/proto.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <future>
#include <thread>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>

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

// The hand-over queued behind the waiter's deadline, both before the waiter
// learns of it, as a process paused past its deadline finds them on waking
// (the chaos suite's seed 6 crashed so, before ffedeb0): a handler of the
// lock object's strand keeps it busy past the deadline while a second thread
// runs the timer, whose completion queues on the strand; then, still on the
// strand, the release runs its hand-over at once (co_spawn dispatches), its
// completion queued behind the deadline's. The waiter fails with
// lock_timeout, and what it was handed (the lead, or the lock in memory)
// goes on: the object grants a free lock after.
TEST_CASE("local handoff: the lead or the lock handed over behind the waiter's deadline in the strand's queue goes on" * doctest::test_suite("threads")) {
  for (bool lead : {true, false}) {
    CAPTURE(lead);
    asio::io_context io;
    session s(io, test_options(shared_hosts()));
    session other(io, test_options(shared_hosts()));
    auto path = unique_path("local-behind-deadline");
    // The lead: max_time 0, so once another session's node is seen a release
    // deletes the node and passes the lead on. The lock: handed in memory.
    mutex m(s, path, handing_over(16, lead ? 0ms : 1h));
    mutex other_mutex(other, path);
    run(io, [&]() -> awaitable<void> {
      auto first = co_await m.async_acquire(use_awaitable);
      co_await m.async_contenders(use_awaitable);  // the hold's children watch is set
      acquire_outcome foreign(io);
      if (lead) {
        other_mutex.async_acquire(foreign.handler());
        REQUIRE(co_await settles_at(s, path, 2));
      }
      auto deadline = std::chrono::steady_clock::now() + 300ms;
      acquire_outcome waiter(io);
      m.async_acquire_until(deadline, waiter.handler());
      asio::steady_timer just_before(io, deadline - 50ms);
      co_await just_before.async_wait(use_awaitable);
      bool released_in_strand = false;
      asio::post(m.get_executor(), [&] {
        std::thread timers([&] {
          while (std::chrono::steady_clock::now() < deadline + 20ms) io.run_one_until(deadline + 20ms);
        });
        std::this_thread::sleep_until(deadline + 60ms);
        timers.join();
        first.async_release(asio::detached);
        released_in_strand = true;
      });
      REQUIRE(co_await waiter.done.wait(10s));
      CHECK(released_in_strand);
      CHECK(*waiter.ec == error::lock_timeout);
      if (lead) {
        REQUIRE(co_await granted(foreign));
        co_await foreign.held.async_release(use_awaitable);
      }
      REQUIRE(co_await settles_at(s, path, 0));
      auto [try_ec, tried] = co_await m.async_try_acquire(as_tuple(use_awaitable));
      CHECK_FALSE(try_ec);
      if (tried) co_await tried.async_release(use_awaitable);
      auto [timed_ec, timed] = co_await m.async_acquire_for(5s, as_tuple(use_awaitable));
      CHECK_FALSE(timed_ec);
      if (timed) co_await timed.async_release(use_awaitable);
      CHECK(co_await settles_at(s, path, 0));
    }());
  }
}

TEST_CASE("held() and lost() may be read from any thread while the lock is lost" * doctest::test_suite("threads")) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  session s(io, test_options(shared_hosts())), other(io, test_options(shared_hosts()));
  auto path = unique_path("safety-observers");
  mutex m(s, path);
  auto held = m.async_acquire(asio::use_future).get();
  auto removed = other.async_remove(held.node(), asio::use_future);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool lost = false;
  while (!lost && std::chrono::steady_clock::now() < deadline) lost = held.lost() && held.held();
  CHECK(lost);
  removed.get();
  held.async_release(asio::use_future).wait();
  work.reset();
  s.async_close(asio::use_future).get();
  other.async_close(asio::use_future).get();
  runner.join();
}

TEST_CASE_FIXTURE(proxied_server, "acquires across real session expiries on a multi-threaded io_context leave no node behind" * doctest::test_suite("threads")) {
  // Whichever session a create lands in, the attempt's node is deleted if its
  // owner is the live session (and goes by itself with an expired one); no
  // write decided in one session is sent in the next (session::pinned), where
  // its node would stand in the queue, held by no one. Fair and race
  // contenders, on a 4-thread io_context, across four expiries.
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { io.run(); });
  session s(io, test_options(proxy.address(), 1s));
  session observer(io, test_options(servers.hosts(), 10s));
  mutex m(s, "/expiring");
  race_mutex race(s, "/expiring-race");
  std::atomic<bool> stop{false};
  std::atomic<int> grants{0}, running{0};
  auto contender = [&](auto& object, int seed) -> awaitable<void> {
    ++running;
    for (int i = 0; !stop; ++i) {
      auto [ec, held] = co_await object.async_acquire_for(std::chrono::milliseconds(20 + (seed * 37 + i * 11) % 200),
                                                          as_tuple(use_awaitable));
      if (ec) continue;
      ++grants;
      co_await held.async_release(as_tuple(use_awaitable));
    }
    --running;
  };
  for (int i = 0; i < 16; ++i) asio::co_spawn(io, contender(m, i), asio::detached);
  for (int i = 0; i < 6; ++i) asio::co_spawn(io, contender(race, i), asio::detached);
  for (int round = 0; round < 4; ++round) {
    auto before = grants.load();
    CHECK(poll_until([&] { return grants >= before + 50; }, 20s));
    // Cut off past the session timeout: the server expires the session; once
    // let through again, the client learns it and starts a new one.
    auto generation = s.generation();
    proxy.refuse_connections(true);
    proxy.drop_now();
    std::this_thread::sleep_for(s.negotiated_timeout() * 3 / 2);
    proxy.refuse_connections(false);
    CHECK(poll_until([&] { return s.generation() != generation; }, 20s));
  }
  stop = true;
  CHECK(poll_until([&] { return running == 0; }, 30s));
  CHECK(grants > 0);
  // The session lives on: every attempt's node must have been deleted.
  auto empty = asio::co_spawn(io, settles_at(observer, "/expiring", 0), asio::use_future);
  CHECK(empty.get());
  auto race_empty = asio::co_spawn(io, eventually_async([&]() -> awaitable<bool> {
                                     co_return !co_await observer.async_exists("/expiring-race", use_awaitable);
                                   }),
                                   asio::use_future);
  CHECK(race_empty.get());
  s.async_close(asio::use_future).get();
  observer.async_close(asio::use_future).get();
  work.reset();
  for (auto& t : threads) t.join();
}

TEST_CASE_FIXTURE(proxied_server, "a race release decided in an expired session never deletes the next session's holder's node" * doctest::test_suite("threads")) {
  // race_mutex holder A (through the proxy) releases: its delete first looks
  // at the race node (exists), and that answer is read late (A's lock strand
  // is kept busy), after A's session expired, B took the node and A's next
  // session connected. Before, the delete then went out in A's new session
  // and removed B's node (B's lost signal fired, A's release said success).
  // Now the delete is pinned to A's first session: refused, lock_lost.
  io_threads threads(io, 2);
  session a(io, test_options(proxy.address(), 1s));
  session b(io, test_options(servers.hosts(), 10s));
  auto path = unique_path("race-release-expired");
  race_mutex ma(a, path), mb(b, path);
  auto held = asio::co_spawn(io, ma.async_acquire(use_awaitable), asio::use_future).get();
  auto first_generation = a.generation();
  std::promise<std::pair<zkasio::error_code, lock>> b_granted;
  mb.async_acquire([&](zkasio::error_code ec, lock l) { b_granted.set_value({ec, std::move(l)}); });
  auto b_lock = b_granted.get_future();
  // A's release: its exists goes to the server, its answer is held.
  proxy.hold_replies();
  auto exists_before = proxy.requests_forwarded(ZOO_EXISTS_OP);
  std::promise<zkasio::error_code> released;
  held.async_release([&](zkasio::error_code ec) { released.set_value(ec); });
  REQUIRE(poll_until([&] { return proxy.requests_forwarded(ZOO_EXISTS_OP) > exists_before; }, 10s));
  // A's lock strand kept busy while the answer comes in, the session ends,
  // B takes the node and A's next session connects.
  std::promise<void> free_strand, strand_busy;
  asio::post(ma.get_executor(), [&] {
    strand_busy.set_value();
    free_strand.get_future().wait();
  });
  strand_busy.get_future().wait();
  // A read of A's own after the exists: answered, it says the exists' answer
  // (A's node) was read before it, on A's session's strand.
  std::promise<void> read_after;
  a.async_exists("/", [&](zkasio::error_code, std::optional<node_stat>) { read_after.set_value(); });
  REQUIRE(poll_until([&] { return proxy.requests_forwarded(ZOO_EXISTS_OP) > exists_before + 1; }, 10s));
  proxy.pass();
  REQUIRE(read_after.get_future().wait_for(10s) == std::future_status::ready);
  proxy.refuse_connections(true);
  proxy.drop_now();
  REQUIRE(b_lock.wait_for(20s) == std::future_status::ready);  // A expired, B granted
  auto [b_ec, b_held] = b_lock.get();
  REQUIRE(!b_ec);
  lost_signal_log b_lost(io);
  b_lost.watch(b_held);
  proxy.refuse_connections(false);
  REQUIRE(poll_until([&] { return a.state() == session_state::connected && a.generation() != first_generation; }, 20s));
  free_strand.set_value();
  auto done = released.get_future();
  REQUIRE(done.wait_for(20s) == std::future_status::ready);
  CHECK(done.get() == error::lock_lost);
  // B's node is still there, and B still holds.
  auto st = asio::co_spawn(io, b.async_exists(path, use_awaitable), asio::use_future).get();
  REQUIRE(st);
  CHECK(st->ephemeral_owner == b.id());
  CHECK_FALSE(b_held.lost());
  asio::co_spawn(io, b_held.async_release(use_awaitable), asio::use_future).get();
  asio::co_spawn(io, a.async_close(use_awaitable), asio::use_future).get();
  asio::co_spawn(io, b.async_close(use_awaitable), asio::use_future).get();
}

TEST_CASE("with_lock on a multi-threaded io_context: every loss aborts its body, and says lock_lost" * doctest::test_suite("threads")) {
  // The caller, the lock's strand and the C client's strand run on different
  // threads: binding the lost signal must not race its emission (under
  // ThreadSanitizer). The caller on a strand finds its body there; a caller
  // on the io_context itself (no strand) gets a strand for its body, where
  // the loss is emitted (before: the emission raced the body's waits).
  for (bool caller_on_strand : {true, false}) {
    CAPTURE(caller_on_strand);
    asio::io_context io;
    auto work = asio::make_work_guard(io);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) threads.emplace_back([&] { io.run(); });
    session s(io, test_options(shared_hosts())), other(io, test_options(shared_hosts()));
    auto path = unique_path("safety-with-lock-threads");
    mutex m(s, path);
    constexpr int rounds = 20;
    int lost = 0, completed = 0, off_strand = 0;
    auto caller_strand = asio::make_strand(io);
    auto caller = [&]() -> awaitable<void> {
      for (int i = 0; i < rounds; ++i) {
        try {
          co_await with_lock(m, [&]() -> awaitable<void> {
            auto nodes = co_await lock_nodes(other, path);
            if (caller_on_strand && !caller_strand.running_in_this_thread()) ++off_strand;  // the caller's
            co_await other.async_remove(path + "/" + nodes.front(), use_awaitable);
            asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
            co_await forever.async_wait(use_awaitable);
            ++completed;
          });
        } catch (const zkasio::system_error& e) {
          if (e.code() == error::lock_lost) ++lost;
        }
      }
    };
    auto done = caller_on_strand ? asio::co_spawn(caller_strand, caller(), asio::use_future)
                                 : asio::co_spawn(io, caller(), asio::use_future);
    REQUIRE(done.wait_for(120s) == std::future_status::ready);
    done.get();
    CHECK(lost == rounds);
    CHECK(completed == 0);
    CHECK(off_strand == 0);
    s.async_close(asio::use_future).get();
    other.async_close(asio::use_future).get();
    work.reset();
    for (auto& t : threads) t.join();
  }
}

TEST_CASE("with_lock on a thread pool: the body runs on its caller's strand, in an awaitable of that strand's type" * doctest::test_suite("threads")) {
  // The caller's state is guarded by its strand: after every suspension of
  // the body (a session's reply, a timer) it must be on that strand again,
  // not on the lock's; and the loss must still abort it. Before: the body
  // ran on the lock's strand, and with_lock compiled for
  // awaitable<T, any_io_executor> only.
  using caller_executor = asio::strand<asio::thread_pool::executor_type>;
  using caller_token = asio::use_awaitable_t<caller_executor>;
  asio::thread_pool pool(3);
  caller_executor caller_strand(pool.get_executor());
  session s(pool, test_options(shared_hosts())), other(pool, test_options(shared_hosts()));
  auto path = unique_path("safety-with-lock-pool");
  mutex m(s, path);
  int off_strand = 0, completed = 0, lost = 0, value = 0;
  auto caller = [&]() -> awaitable<void, caller_executor> {
    co_await s.async_connect(caller_token{});
    // Completes: the result comes through; the body stays on the strand.
    value = co_await with_lock(m, [&]() -> awaitable<int, caller_executor> {
      for (int i = 0; i < 5; ++i) {
        co_await s.async_exists(path, caller_token{});
        if (!caller_strand.running_in_this_thread()) ++off_strand;
        asio::steady_timer t(caller_strand, 1ms);
        co_await t.async_wait(caller_token{});
        if (!caller_strand.running_in_this_thread()) ++off_strand;
      }
      ++completed;
      co_return 7;
    });
    // Lost during the body: aborted there, lock_lost here.
    try {
      co_await with_lock(m, [&](const lock& held) -> awaitable<void, caller_executor> {
        co_await other.async_remove(held.node(), caller_token{});
        if (!caller_strand.running_in_this_thread()) ++off_strand;
        asio::steady_timer forever(caller_strand, 1h);
        co_await forever.async_wait(caller_token{});
        ++completed;
      });
    } catch (const zkasio::system_error& e) {
      if (e.code() == error::lock_lost) ++lost;
    }
    if (!caller_strand.running_in_this_thread()) ++off_strand;
  };
  auto done = asio::co_spawn(caller_strand, caller(), asio::use_future);
  REQUIRE(done.wait_for(60s) == std::future_status::ready);
  done.get();
  CHECK(off_strand == 0);
  CHECK(value == 7);
  CHECK(completed == 1);
  CHECK(lost == 1);
  s.async_close(asio::use_future).get();
  other.async_close(asio::use_future).get();
  pool.join();
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter, "a create decided as the connection went waits for the next one, its listing fails meanwhile: the node is found, granted" * doctest::test_suite("threads")) {
  // The acquire's wait for the connection ends (connected); before it is
  // read (its lock strand kept busy) the connection goes again: the create
  // it then decides waits for the next connection with no deadline of its
  // own, the listing after it fails at once (read_retry_timeout 0 here).
  // Before: the acquire failed with connection_loss, though its session
  // lived on. Now it finds its node once connected.
  io_threads threads(io, 2);
  auto path = unique_path("create-parked");
  mutex m(s, path);
  asio::co_spawn(io, waiter_connected(), asio::use_future).get();
  auto generation = s.generation();
  proxy.refuse_connections(true);
  proxy.drop_now();
  REQUIRE(poll_until([&] { return s.state() == session_state::suspended; }, 10s));
  std::promise<std::pair<zkasio::error_code, lock>> acquired;
  m.async_acquire([&](zkasio::error_code ec, lock l) { acquired.set_value({ec, std::move(l)}); });
  // The acquire waits for the connection; its lock strand is then kept busy.
  std::promise<void> free_strand, strand_busy;
  asio::post(m.get_executor(), [&] {
    strand_busy.set_value();
    free_strand.get_future().wait();
  });
  strand_busy.get_future().wait();
  proxy.refuse_connections(false);
  REQUIRE(poll_until([&] { return s.state() == session_state::connected; }, 10s));
  proxy.refuse_connections(true);
  proxy.drop_now();
  REQUIRE(poll_until([&] { return s.state() == session_state::suspended; }, 10s));
  free_strand.set_value();  // connected (it reads): create, while cut off
  auto outcome = acquired.get_future();
  proxy.refuse_connections(false);
  REQUIRE(outcome.wait_for(20s) == std::future_status::ready);
  auto [ec, held] = outcome.get();
  CHECK(!ec);
  CHECK(s.generation() == generation);
  CHECK(held.held());
  auto nodes = asio::co_spawn(io, lock_nodes(holder, path), asio::use_future).get();
  CHECK(nodes.size() == 1);
  if (held) asio::co_spawn(io, held.async_release(use_awaitable), asio::use_future).get();
  s.async_close(asio::use_future).get();
  holder.async_close(asio::use_future).get();
}

TEST_CASE("acquires cancelled from other threads of a multi-threaded io_context: no race, no hang" * doctest::test_suite("threads")) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { io.run(); });
  session s(io, test_options(shared_hosts())), holder(io, test_options(shared_hosts()));
  auto path = unique_path("safety-cancel-threads");
  mutex m(s, path), m_holder(holder, path);
  std::atomic<int> progress{-1};
  // The caller on a strand, as a coroutine using `||` on a multi-threaded
  // io_context must be (its branches run on the caller's executor).
  auto task = asio::co_spawn(asio::make_strand(io), [&]() -> awaitable<void> {
    auto held = co_await m_holder.async_acquire(use_awaitable);
    for (int i = 0; i < 400; ++i) {
      progress = i;
      asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::microseconds(i * 37 % 2000));
      auto r = co_await (m.async_acquire(as_tuple(use_awaitable)) || timer.async_wait(as_tuple(use_awaitable)));
      if (r.index() == 0) {
        auto [ec, l] = std::move(std::get<0>(r));
        if (!ec) co_await l.async_release(as_tuple(use_awaitable));
      }
      if (i == 300) co_await held.async_release(use_awaitable);
    }
  }, asio::use_future);
  bool finished = task.wait_for(120s) == std::future_status::ready;
  CHECK_MESSAGE(finished, "stuck at iteration " << progress.load());
  if (finished) task.get();
  auto nodes = asio::co_spawn(io, settles_at(s, path, 0), asio::use_future);
  CHECK(nodes.get());
  s.async_close(asio::use_future).get();
  holder.async_close(asio::use_future).get();
  work.reset();
  for (auto& t : threads) t.join();
}

TEST_CASE("with_lock: the loss and the caller's cancellation in one tick of the lock's strand say lock_lost, and release" * doctest::test_suite("threads")) {
  // The two stops of the body meet: the caller cancelled from the loss's own
  // handlers, before the loss's stop (by the observer, which hears the loss
  // first, on the strand) or right after it (by a lost wait of its own,
  // completed after with_lock's). Either way the body is stopped once, the
  // lock released, and the loss said, not the cancellation.
  for (bool cancel_first : {true, false}) {
    CAPTURE(cancel_first);
    cancelled_caller t("safety-with-lock-loss-and-cancel");
    int cancels = 0;
    auto cancel_caller = [&] {
      ++cancels;
      t.cancel.emit(asio::cancellation_type::terminal);
    };
    lock_options options;
    options.observer = [&](const lock_event& e) {
      if (cancel_first && e.what == lock_event::kind::lost) cancel_caller();
    };
    mutex m(t.s, t.path, options);
    bool waited_to_the_end = false;
    auto outcome = t.with_lock_outcome(m, [&](const lock& held) -> awaitable<void> {
      if (!cancel_first)
        held.async_wait_lost([&](zkasio::error_code ec) {
          if (!ec) cancel_caller();
        });
      // (The loss may stop this wait already: the watch's event comes
      // before the remove's reply.)
      co_await t.other.async_remove(held.node(), as_tuple(use_awaitable));
      asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
      co_await forever.async_wait(use_awaitable);
      waited_to_the_end = true;
    });
    CHECK(cancels == 1);
    CHECK(!waited_to_the_end);
    CHECK(outcome == error::lock_lost);
    t.settle();
  }
}

// Runs `io` on a thread of its own until finish(), or, whichever way the test
// ends (a failed REQUIRE too), stops it at once and joins. Declared after
// everything its handlers use, so that all of it outlives the thread.
struct thread_running {
  explicit thread_running(asio::io_context& io) : io(io), work(io.get_executor()), thread([&io] { io.run(); }) {}
  thread_running(const thread_running&) = delete;
  thread_running& operator=(const thread_running&) = delete;
  // Lets it run out of work (what the test started has ended), then joins.
  void finish() {
    work.reset();
    thread.join();
  }
  ~thread_running() {
    if (!thread.joinable()) return;
    io.stop();
    thread.join();
  }

  asio::io_context& io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;
};

TEST_CASE("with_lock: a loss after the body has started, before its first wait, stops its next wait" * doctest::test_suite("threads")) {
  // The lock's strand runs on one thread, the caller on another: the body
  // sees the loss happen after with_lock's check and before it waits. The
  // loss's stop, posted to the body's executor, runs while the body is
  // suspended in a wait that cannot be cancelled (a post) or in the
  // cancellable wait itself; either way that wait or the next one ends it.
  for (bool uncancellable_first : {false, true}) {
    CAPTURE(uncancellable_first);
    asio::io_context lock_io, caller_io;
    session s(lock_io, test_options(shared_hosts())), other(lock_io, test_options(shared_hosts()));
    auto path = unique_path("safety-with-lock-loss-in-body");
    mutex m(s, path);
    std::atomic<bool> removed{false};
    bool saw_loss_before_waiting = false, waited_to_the_end = false;
    std::optional<zkasio::error_code> outcome;
    auto caller = [&]() -> awaitable<void> {
      try {
        co_await with_lock(m, [&](const lock& held) -> awaitable<void> {
          // (On the lock's thread: this thread does not wait meanwhile.)
          other.async_remove(held.node(), [&](zkasio::error_code) { removed = true; });
          auto give_up = std::chrono::steady_clock::now() + 20s;
          while (!held.lost() && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(1ms);
          saw_loss_before_waiting = held.lost();
          if (uncancellable_first) co_await asio::post(co_await asio::this_coro::executor, use_awaitable);
          asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
          co_await forever.async_wait(use_awaitable);
          waited_to_the_end = true;
        });
        outcome = zkasio::error_code{};
      } catch (const zkasio::system_error& e) {
        outcome = e.code();
      }
    };
    thread_running lock_thread(lock_io);
    auto done = asio::co_spawn(caller_io, caller(), asio::use_future);
    caller_io.run_for(30s);
    REQUIRE(done.wait_for(0s) == std::future_status::ready);
    done.get();
    // (The delete's reply comes on the other session's connection, in no
    // order with the holder's watch event that ended with_lock.)
    CHECK(poll_until([&] { return removed.load(); }, 10s));
    CHECK(saw_loss_before_waiting);
    CHECK(!waited_to_the_end);
    REQUIRE(outcome.has_value());
    CHECK(*outcome == error::lock_lost);
    auto settled = asio::co_spawn(lock_io, settles_at(s, path, 0), asio::use_future);
    REQUIRE(settled.wait_for(20s) == std::future_status::ready);
    CHECK(settled.get());
    s.async_close(asio::use_future).get();
    other.async_close(asio::use_future).get();
    lock_thread.finish();
  }
}
