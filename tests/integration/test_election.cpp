// zkasio::election (fair and race modes) and zkasio::race_mutex against a
// real server: one leader at any moment, the fair mode in node order,
// observers that miss no change, a new leader after the leader's session
// expires, nothing left after resignation, cancellation, timeouts and a lost
// create reply, and the race mutex's exclusion.
#include <doctest/doctest.h>
#include <zookeeper/proto.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>
#include <future>
#include <set>
#include <thread>
#include <zkasio/election.hpp>
#include <zkasio/race_mutex.hpp>

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

constexpr election_mode both_modes[] = {election_mode::fair, election_mode::race};

std::string name_of(election_mode mode) { return mode == election_mode::fair ? "fair" : "race"; }

// The election's nodes as the server has them: the candidates (fair), or
// whether the race node is there.
awaitable<std::size_t> candidates(session& s, std::string path, election_mode mode) {
  if (mode == election_mode::fair) co_return (co_await lock_nodes(s, path, queue_family::election)).size();
  auto [ec, st] = co_await s.async_exists(path, as_tuple(use_awaitable));
  co_return !ec && st ? 1 : 0;
}

// Waits (at most 10 s) until the election has `count` nodes.
awaitable<bool> settles(session& s, std::string path, election_mode mode, std::size_t count) {
  if (mode == election_mode::fair) co_return co_await settles_at(s, path, count, 10s, queue_family::election);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (co_await candidates(s, path, mode) != count) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    tick.expires_after(5ms);
    co_await tick.async_wait(use_awaitable);
  }
  co_return true;
}

// Two sessions on the shared server, with an election each on one path.
struct two_candidates {
  two_candidates(const std::string& name, election_mode mode)
      : path(unique_path(name + "-" + name_of(mode))), ea(a, path, mode), eb(b, path, mode) {}
  asio::io_context io;
  session a{io, test_options(shared_hosts())}, b{io, test_options(shared_hosts())};
  std::string path;
  election ea, eb;
};

std::int64_t sequence_of(const std::string& node) {
  auto parsed = detail::parse_lock_node(node.substr(node.rfind('/') + 1));
  REQUIRE(parsed);
  return static_cast<std::int32_t>(parsed->sequence);
}

}  // namespace

TEST_CASE("one leader at any moment among 50 candidates over 8 sessions; fair mode in node order; an observer sees every leader") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    asio::io_context io;
    objects_over_sessions<election> elections(io, "election-" + name_of(mode), 8, mode);
    auto& path = elections.path;
    constexpr int candidates_count = 50;
    int leading = 0, most = 0, failures = 0;
    std::vector<std::string> led;  // the leaders' nodes, in the order they led
    std::vector<std::int64_t> tokens;
    std::set<std::string> observed;  // every leader the observer saw
    // The observer: each leader resigns only once the observer has seen it,
    // so a missed change would leave it waiting (and fail the bound). It
    // watches until cancelled.
    asio::cancellation_signal stop_observer;
    zkasio::error_code observer_end;
    test_event observer_done(io.get_executor());
    auto observe = [&]() -> awaitable<void> {
      auto current = co_await elections[0].async_leader(use_awaitable);
      for (;;) {
        if (current) observed.insert(current->node + "|" + current->data);
        current = co_await elections[0].async_leader_changed(current, use_awaitable);
      }
    };
    asio::co_spawn(io, observe(), asio::bind_cancellation_slot(stop_observer.slot(), [&](std::exception_ptr e) {
                     try {
                       if (e) std::rethrow_exception(e);
                     } catch (const zkasio::system_error& x) {
                       observer_end = x.code();
                     }
                     observer_done.count();
                   }));
    auto candidate = [&](election& e, int id) -> awaitable<void> {
      auto data = "candidate-" + std::to_string(id);
      auto leads = co_await e.async_campaign(data, use_awaitable);
      most = std::max(most, ++leading);
      led.push_back(leads.node());
      tokens.push_back(leads.fencing_token().czxid);
      auto who = co_await e.async_leader(use_awaitable);
      CHECK((who && who->node == leads.node() && who->data == data));
      co_await eventually([&] { return observed.count(leads.node() + "|" + data) > 0; }, 10s);
      --leading;
      co_await leads.async_resign(use_awaitable);
    };
    failures += run_coroutines(io, candidates_count, [&](int i) { return candidate(elections[i], i); }, 120s);
    CHECK(failures == 0);
    CHECK(most == 1);
    CHECK(observed.size() == candidates_count);
    CHECK(std::is_sorted(tokens.begin(), tokens.end()));
    if (mode == election_mode::fair) {
      std::vector<std::int64_t> sequences;
      for (auto& node : led) sequences.push_back(sequence_of(node));
      CHECK(std::is_sorted(sequences.begin(), sequences.end()));
    }
    stop_observer.emit(asio::cancellation_type::terminal);
    run(io, [&]() -> awaitable<void> {
      CHECK(co_await observer_done.wait(10s));
      CHECK(observer_end == asio::error::operation_aborted);
      CHECK(!(co_await elections[1].async_leader(use_awaitable)));
      CHECK(co_await settles(elections.first_session(), path, mode, 0));
    }());
  }
}

TEST_CASE("the observers: nobody, then who campaigned; a change since the last look completes at once") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    two_candidates t("election-observe", mode);
    auto& [io, a, b, path, ea, eb] = t;
    CHECK(ea.mode() == mode);
    run(io, [&]() -> awaitable<void> {
      CHECK(!(co_await eb.async_leader(use_awaitable)));  // the path does not exist yet
      // Waiting for a first leader.
      std::optional<std::optional<leader>> changed;
      test_event change(io.get_executor());
      eb.async_leader_changed(std::nullopt, [&](zkasio::error_code ec, std::optional<leader> who) {
        CHECK(!ec);
        changed = who;
        change.count();
      });
      auto first = co_await ea.async_campaign("alpha", use_awaitable);
      REQUIRE(co_await change.wait(10s));
      REQUIRE(*changed);
      CHECK((**changed).data == "alpha");
      CHECK((**changed).node == first.node());
      CHECK((**changed).fencing_token == first.fencing_token());
      // Two changes between two looks: the next look completes at once with
      // the latest.
      auto last = *changed;
      co_await first.async_resign(use_awaitable);
      auto second = co_await eb.async_campaign("beta", use_awaitable);
      auto now = co_await ea.async_leader_changed(last, use_awaitable);
      REQUIRE(now);
      CHECK(now->data == "beta");
      CHECK(now->fencing_token > last->fencing_token);
      // Cancelled, an observer completes with operation_aborted.
      asio::cancellation_signal cancel;
      zkasio::error_code observed;
      test_event aborted(io.get_executor());
      ea.async_leader_changed(now, asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec, auto) {
                                observed = ec;
                                aborted.count();
                              }));
      cancel.emit(asio::cancellation_type::terminal);
      REQUIRE(co_await aborted.wait(10s));
      CHECK(observed == asio::error::operation_aborted);
      co_await second.async_resign(use_awaitable);
      CHECK(!(co_await ea.async_leader(use_awaitable)));
    }());
  }
}

// An observer makes nothing (before: it made the election's path with its
// own default ACL, creator-all and world-read once its session had
// authenticated, and every candidate of another identity got no_auth for
// good; the path stayed, unused).
TEST_CASE("an authenticated observer of an election not made yet makes nothing: a candidate of another identity leads") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    asio::io_context io;
    session watcher(io, test_options(shared_hosts())), candidate(io, test_options(shared_hosts()));
    auto top = unique_path("election-observer-" + mode_name);
    auto path = top + "/jobs/leader";
    election observed(watcher, path, mode), campaigner(candidate, path, mode);
    run(io, [&]() -> awaitable<void> {
      co_await watcher.async_add_auth("digest", "observer:secret", use_awaitable);
      std::optional<std::optional<leader>> changed;
      test_event change(io.get_executor());
      observed.async_leader_changed(std::nullopt, [&](zkasio::error_code ec, std::optional<leader> who) {
        CHECK(!ec);
        changed = who;
        change.count();
      });
      // After a round trip of the observer's session its wait is set.
      co_await watcher.async_exists("/", use_awaitable);
      co_await watcher.async_exists("/", use_awaitable);
      CHECK(!(co_await candidate.async_exists(top, use_awaitable)));
      auto [ec, leading] = co_await campaigner.async_campaign_for("open", 10s, as_tuple(use_awaitable));
      REQUIRE_FALSE(ec);
      REQUIRE(co_await change.wait(10s));
      REQUIRE(*changed);
      CHECK((**changed).node == leading.node());
      CHECK((**changed).data == "open");
      co_await leading.async_resign(use_awaitable);
      // An observer cancelled before anyone campaigned leaves nothing either.
      auto never = unique_path("election-never-" + mode_name);
      election unused(watcher, never + "/e", mode);
      asio::cancellation_signal cancel;
      test_event aborted(io.get_executor());
      unused.async_leader_changed(std::nullopt, asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec, auto) {
                                    CHECK(ec == asio::error::operation_aborted);
                                    aborted.count();
                                  }));
      co_await watcher.async_exists("/", use_awaitable);
      cancel.emit(asio::cancellation_type::terminal);
      REQUIRE(co_await aborted.wait(10s));
      CHECK(!(co_await candidate.async_exists(never, use_awaitable)));
    }());
  }
}

// The observer waits for the path on its nearest existing ancestor's
// children, the root here: a path made just before that watch was set is
// seen by a listing sent after it (the root's cversion, which the watch
// compares, did not show the change). Before, the first of these observers
// after the server's start slept until another child of the root came.
TEST_CASE("an observer waiting for an election's path wakes when a candidate makes it, every time") {
  for (int i = 0; i < 20; ++i) {
    CAPTURE(i);
    asio::io_context io;
    session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
    auto path = unique_path("election-appears");
    election observer(a, path), candidate(b, path);
    run(io, [&]() -> awaitable<void> {
      std::optional<std::optional<leader>> seen;
      observer.async_leader_changed(std::nullopt, [&](zkasio::error_code ec, std::optional<leader> who) {
        CHECK(!ec);
        seen = who;
      });
      auto leading = co_await candidate.async_campaign("first", use_awaitable);
      REQUIRE(co_await eventually([&] { return seen.has_value(); }, 10s));
      CHECK((*seen && (**seen).node == leading.node()));
      co_await leading.async_resign(use_awaitable);
    }(), 30s);
  }
}

TEST_CASE_FIXTURE(proxied_server, "the leader's session expires: its lost signal fires and another leads within the session timeout plus one second") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    session leader_session(io, test_options(proxy.address(), 2s)), follower(io, test_options(servers.hosts(), 10s));
    auto path = unique_path("election-expiry-" + name_of(mode));
    election el(leader_session, path, mode), ef(follower, path, mode);
    run(io, [&]() -> awaitable<void> {
      auto leads = co_await el.async_campaign("first", use_awaitable);
      auto timeout = leader_session.negotiated_timeout();
      std::optional<zkasio::error_code> follower_ec;
      leadership next;
      test_event next_leads(io.get_executor());
      ef.async_campaign("second", [&](zkasio::error_code ec, leadership l) {
        follower_ec = ec;
        next = std::move(l);
        next_leads.count();
      });
      REQUIRE(co_await settles(follower, path, mode, mode == election_mode::fair ? 2 : 1));
      lost_signal_log lost(io);
      lost.watch(leads);
      auto cut = std::chrono::steady_clock::now();
      proxy.refuse_connections(true);
      proxy.drop_now();
      REQUIRE(co_await lost.fired.wait(10s));
      CHECK(lost.at - cut < timeout);  // told before the server could expire it
      REQUIRE(co_await next_leads.wait(timeout + 10s));
      CHECK(!*follower_ec);
      CHECK(std::chrono::steady_clock::now() - cut < timeout + 1s);
      CHECK(next.fencing_token() > leads.fencing_token());
      proxy.refuse_connections(false);
      auto [ec] = co_await leads.async_resign(as_tuple(use_awaitable));
      CHECK(ec == error::lock_lost);
      auto who = co_await ef.async_leader(use_awaitable);
      CHECK((who && who->data == "second"));
      co_await next.async_resign(use_awaitable);
      CHECK(co_await settles(follower, path, mode, 0));
    }(), 60s);
  }
}

TEST_CASE("resignation, cancellation, timeouts and destruction leave no node; with_leadership resigns") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    two_candidates t("election-leave", mode);
    auto& [io, a, b, path, ea, eb] = t;
    run(io, [&]() -> awaitable<void> {
      auto leads = co_await ea.async_campaign("a", use_awaitable);
      // A waiting campaign, cancelled (terminal, then partial).
      for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
        asio::cancellation_signal cancel;
        std::optional<zkasio::error_code> outcome;
        test_event done(io.get_executor());
        eb.async_campaign("b", asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec, leadership) {
                            outcome = ec;
                            done.count();
                          }));
        if (mode == election_mode::fair) REQUIRE(co_await settles(a, path, mode, 2));
        cancel.emit(type);
        REQUIRE(co_await done.wait(10s));
        CHECK(*outcome == asio::error::operation_aborted);
        CHECK(co_await settles(a, path, mode, 1));
      }
      // Timed out.
      auto [timeout_ec, none] = co_await eb.async_campaign_for("b", 100ms, as_tuple(use_awaitable));
      CHECK(timeout_ec == error::lock_timeout);
      CHECK(!none);
      CHECK(co_await settles(a, path, mode, 1));
      // Dropped: the destructor resigns.
      { auto dropped = std::move(leads); }
      CHECK(co_await settles(a, path, mode, 0));
      // with_leadership: the body runs as the leader, then resigns.
      auto token = co_await with_leadership(eb, "body", [&]() -> awaitable<std::int64_t> {
        auto who = co_await ea.async_leader(use_awaitable);
        REQUIRE(who);
        CHECK(who->data == "body");
        co_return who->fencing_token.czxid;
      });
      CHECK(token > 0);
      CHECK(co_await settles(a, path, mode, 0));
    }());
  }
}

TEST_CASE_FIXTURE(proxied_server, "race mode: a create whose reply was lost is found by its owner and leads; cancelled instead, it is deleted") {
  session s(io, test_options(proxy.address(), 10s)), other(io, test_options(servers.hosts()));
  auto path = unique_path("election-race-lost");
  election e(s, path, election_mode::race), e_other(other, path, election_mode::race);
  run(io, [&]() -> awaitable<void> {
    co_await s.async_exists("/", use_awaitable);
    proxy.arm_cut(tcp_proxy::cut::lose_reply, ZOO_CREATE2_OP);
    auto leads = co_await e.async_campaign("lost", use_awaitable);
    CHECK(proxy.wait_cut(0ms));
    auto who = co_await e_other.async_leader(use_awaitable);
    REQUIRE(who);
    CHECK(who->fencing_token == leads.fencing_token());
    co_await leads.async_resign(use_awaitable);
    CHECK(co_await settles(other, path, election_mode::race, 0));
    // Cancelled while its reply is held back: the node it made goes.
    proxy.hold_replies();
    asio::cancellation_signal cancel;
    std::optional<zkasio::error_code> outcome;
    test_event done(io.get_executor());
    e.async_campaign("cancelled", asio::bind_cancellation_slot(cancel.slot(), [&](zkasio::error_code ec, leadership) {
                       outcome = ec;
                       done.count();
                     }));
    REQUIRE(co_await settles(other, path, election_mode::race, 1));
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await done.wait(10s));
    CHECK(*outcome == asio::error::operation_aborted);
    proxy.pass();
    CHECK(co_await settles(other, path, election_mode::race, 0));
  }(), 30s);
}

TEST_CASE("the race mutex never has two holders: 100 coroutines over 8 sessions") {
  asio::io_context io;
  objects_over_sessions<race_mutex> mutexes(io, "race-mutex", 8);
  constexpr int contenders = 100, rounds = 3;
  int holding = 0, most = 0, grants = 0;
  std::int64_t last_token = 0;
  bool tokens_grow = true;
  auto contender = [&](race_mutex& m) -> awaitable<void> {
    for (int i = 0; i < rounds; ++i) {
      co_await with_lock(m, [&]() -> awaitable<void> {
        most = std::max(most, ++holding);
        ++grants;
        auto who = co_await m.async_holder(use_awaitable);
        CHECK(who);
        tokens_grow = tokens_grow && who && who->fencing_token.czxid > last_token;
        if (who) last_token = who->fencing_token.czxid;
        --holding;
      });
    }
  };
  CHECK(run_coroutines(io, contenders, [&](int i) { return contender(mutexes[i]); }, 240s) == 0);
  CHECK(grants == contenders * rounds);
  CHECK(most == 1);
  CHECK(tokens_grow);
  run(io, [&]() -> awaitable<void> {
    CHECK(co_await settles(mutexes.first_session(), mutexes.path, election_mode::race, 0));
    CHECK(!(co_await mutexes[0].async_holder(use_awaitable)));
  }());
}

TEST_CASE("the race mutex: try, reentrancy by owner, and bad paths named") {
  asio::io_context io;
  session a(io, test_options(shared_hosts())), b(io, test_options(shared_hosts()));
  auto path = unique_path("race-mutex-try") + "/deeper/lock";
  race_mutex ma(a, path), mb(b, path);
  CHECK_THROWS_WITH_AS(race_mutex(a, "no-slash"), doctest::Contains("no-slash"), zkasio::system_error);
  CHECK_THROWS_AS(election(a, "/", election_mode::race), zkasio::system_error);
  run(io, [&]() -> awaitable<void> {
    // A persistent node at the path is no race node: refused at once, not waited for.
    auto taken = unique_path("race-mutex-persistent");
    co_await a.async_create(taken, "", use_awaitable);
    race_mutex on_persistent(a, taken);
    auto [persistent_ec, none_held] = co_await on_persistent.async_acquire(as_tuple(use_awaitable));
    CHECK(persistent_ec == zk_error::node_exists);
    co_await a.async_remove(taken, use_awaitable);
    owner me;
    auto first = co_await ma.async_acquire({.who = me}, use_awaitable);  // parents made as containers
    auto again = co_await ma.async_acquire({.who = me}, use_awaitable);
    CHECK(again.node() == first.node());
    co_await owner_and_timeout_combine(ma, me, first);
    co_await b.async_connect(use_awaitable);  // a try is one look: not_connected while b connects
    auto [busy_ec, none] = co_await mb.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy_ec == error::lock_busy);
    co_await again.async_release(use_awaitable);
    CHECK(co_await settles(a, path, election_mode::race, 1));  // one grant still holds it
    auto first_token = first.fencing_token();
    co_await first.async_release(use_awaitable);
    auto second = co_await mb.async_try_acquire(use_awaitable);
    CHECK(second.fencing_token() > first_token);
    co_await second.async_release(use_awaitable);
    CHECK(co_await settles(a, path, election_mode::race, 0));
  }());
}

TEST_CASE("the race mutex in one session: a second contender waits its turn, one cancelled in line leaves it, a try says busy at once, and none touches the holder's node") {
  asio::io_context io;
  session s(io, test_options(shared_hosts())), other(io, test_options(shared_hosts()));
  auto path = unique_path("race-mutex-one-session");
  race_mutex m1(s, path), m2(s, path), m3(s, path), m_other(other, path);
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m1.async_acquire(use_awaitable);
    auto token = held.fencing_token();
    acquire_outcome waiter(io);
    m2.async_acquire(waiter.handler());
    // A contender cancelled while in the line leaves it (the line goes on, below).
    asio::cancellation_signal cancel;
    acquire_outcome cancelled(io);
    m3.async_acquire(asio::bind_cancellation_slot(cancel.slot(), cancelled.handler()));
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(co_await cancelled.done.wait(10s));
    CHECK(*cancelled.ec == asio::error::operation_aborted);
    auto [busy_ec, none] = co_await m3.async_try_acquire(as_tuple(use_awaitable));
    CHECK(busy_ec == error::lock_busy);
    auto [timeout_ec, none_either] = co_await m3.async_acquire_for(200ms, as_tuple(use_awaitable));
    CHECK(timeout_ec == error::lock_timeout);
    // The holder's node is still its own, and nobody else got the lock.
    auto who = co_await m_other.async_holder(use_awaitable);
    REQUIRE(who);
    CHECK(who->fencing_token == token);
    CHECK(!held.lost());
    CHECK(!waiter.done.happened());
    auto [other_ec, other_lock] = co_await m_other.async_try_acquire(as_tuple(use_awaitable));
    CHECK(other_ec == error::lock_busy);
    co_await held.async_release(use_awaitable);
    REQUIRE(co_await waiter.done.wait(10s));
    CHECK(!*waiter.ec);
    CHECK(waiter.held.fencing_token() > token);
    co_await waiter.held.async_release(use_awaitable);
    // The cancelled contender's place in the line was given up: the session's next one goes.
    auto after = co_await m3.async_acquire_for(10s, use_awaitable);
    co_await after.async_release(use_awaitable);
    CHECK(co_await settles(other, path, election_mode::race, 0));
  }());
}

TEST_CASE_FIXTURE(proxied_server, "race mode: a holder whose node was deleted and made again by another before its watch was set is told it lost") {
  session a(io, test_options(proxy.address(), 10s)), t(io, test_options(servers.hosts())),
      operator_session(io, test_options(servers.hosts()));
  auto path = unique_path("race-mutex-incarnation");
  race_mutex ma(a, path), mt(t, path);
  run(io, [&]() -> awaitable<void> {
    co_await a.async_exists("/", use_awaitable);
    // A's create is applied; its reply (and all that follows) held back.
    proxy.hold_replies();
    acquire_outcome granted(io);
    ma.async_acquire(granted.handler());
    REQUIRE(co_await settles(operator_session, path, election_mode::race, 1));
    co_await operator_session.async_remove(path, use_awaitable);
    auto t_holds = co_await mt.async_acquire(use_awaitable);
    proxy.pass();
    REQUIRE(co_await granted.done.wait(10s));
    REQUIRE(!*granted.ec);
    lost_signal_log lost(io);
    lost.watch(granted.held);
    CHECK((granted.held.lost() || co_await lost.fired.wait(10s)));
    // Its release says so and leaves T's node alone.
    auto [release_ec] = co_await granted.held.async_release(as_tuple(use_awaitable));
    CHECK(release_ec == error::lock_lost);
    auto who = co_await mt.async_holder(use_awaitable);
    REQUIRE(who);
    CHECK(who->fencing_token == t_holds.fencing_token());
    CHECK(!t_holds.lost());
    co_await t_holds.async_release(use_awaitable);
  }(), 30s);
}

TEST_CASE("guarded writes: refused under a race recipe's lock (nothing fences it) and under a lock that may be lost") {
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  auto path = unique_path("guarded");
  race_mutex racing(s, path + "/race");
  mutex fair(s, path + "/fair");
  run(io, [&]() -> awaitable<void> {
    // (Not braced lists in a co_await: g++ 12's coroutines reject them.)
    std::vector<multi_op> writes;
    writes.push_back(op::create{path + "/x", "", {}});
    auto held = co_await racing.async_acquire(use_awaitable);
    auto [race_ec, none] = co_await held.async_guarded_multi(writes, as_tuple(use_awaitable));
    CHECK(race_ec == error::not_fenced);
    CHECK(race_ec == condition::caller_fault);
    auto fair_held = co_await fair.async_acquire(use_awaitable);
    lost_signal_log lost(io);
    lost.watch(fair_held);
    co_await fair.async_revoke(fair_held.node(), use_awaitable);
    REQUIRE(co_await lost.fired.wait(10s));
    auto [lost_ec, results] = co_await fair_held.async_guarded_multi(writes, as_tuple(use_awaitable));
    CHECK(lost_ec == error::lock_lost);
    auto [exists_ec, st] = co_await s.async_exists(path + "/x", as_tuple(use_awaitable));
    CHECK(!st);
    co_await held.async_release(use_awaitable);
    co_await fair_held.async_release(as_tuple(use_awaitable));
  }());
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter, "a race waiter rides through a lost connection that its session survives") {
  race_mutex m_holder(holder, "/race-ride"), m(s, "/race-ride");
  run(io, [&]() -> awaitable<void> {
    auto held = co_await m_holder.async_acquire();
    auto generation = co_await waiter_connected();
    // The waiter's first look at the holder's node loses its reply with the connection.
    proxy.arm_cut(tcp_proxy::cut::lose_reply, ZOO_EXISTS_OP);
    acquire_outcome w(io);
    m.async_acquire(w.handler());
    REQUIRE(co_await eventually([&] { return proxy.wait_cut(0ms); }, 5s));
    co_await held.async_release();
    co_await rode_through(w, generation);
    co_await w.held.async_release();
  }(), 30s);
}

TEST_CASE_FIXTURE(proxied_server, "the race mutex: a holder lost but kept across its session's expiry; the contender of that session waiting its turn ends at once, or queues again in the next session") {
  for (bool requeue : {false, true}) {
    CAPTURE(requeue);
    session s(io, test_options(proxy.address(), 1s));
    session observer(io, test_options(servers.hosts(), 10s));
    auto path = "/race-kept-" + std::to_string(requeue);
    race_mutex m(s, path, {.requeue_on_expiry = requeue});
    run(io, [&]() -> awaitable<void> {
      auto held = co_await m.async_acquire(use_awaitable);
      acquire_outcome w(io);
      m.async_acquire(w.handler());  // waits its session's turn, in this process
      lost_signal_log lost(io);
      lost.watch(held);
      proxy.refuse_connections(true);
      proxy.drop_now();
      REQUIRE(co_await lost.fired.wait(5s));
      CHECK(co_await settles(observer, path, election_mode::race, 0));  // the server expired the session
      proxy.refuse_connections(false);
      // The lost holder is kept (not released): its turn is of the old session.
      REQUIRE(co_await w.done.wait(10s));
      if (requeue) {
        CHECK(!*w.ec);
        CHECK(w.held.held());
        co_await w.held.async_release(use_awaitable);
      } else {
        CHECK(*w.ec == zk_error::session_expired);
      }
      co_await held.async_release(as_tuple(use_awaitable));
      CHECK(co_await settles(observer, path, election_mode::race, 0));
      co_await s.async_close(use_awaitable);
    }(), 60s);
  }
}

TEST_CASE_FIXTURE(proxied_server, "the race mutex: an attempt that reads its reply only after its session expired and the next began never takes the next session's holder's node for its own") {
  // A multi-threaded io_context, one thread of which keeps the old attempt's
  // strand busy until the next session's contender holds the node.
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { io.run(); });
  std::promise<void> free_strand;
  struct join_all {
    std::vector<std::thread>& threads;
    decltype(work)& guard;
    std::promise<void>& free_strand;
    ~join_all() {
      try { free_strand.set_value(); } catch (const std::future_error&) {}
      guard.reset();
      for (auto& t : threads) t.join();
    }
  } joined{threads, work, free_strand};
  session holder(io, test_options(servers.hosts(), 10s));
  session s(io, test_options(proxy.address(), 1s));
  const std::string path = "/race-late-reply";
  race_mutex m_holder(holder, path), m_old(s, path), m_new(s, path);
  auto held = m_holder.async_acquire(asio::use_future).get();
  s.async_create("/race-late-marker", "", create_options{create_mode::ephemeral}, asio::use_future).get();
  auto generation = s.generation();

  // The old attempt's create finds the holder's node: its reply waits on the
  // attempt's strand, which is kept busy.
  auto creates = proxy.requests_forwarded(ZOO_CREATE2_OP) + proxy.requests_forwarded(ZOO_CREATE_OP);
  proxy.hold_replies();
  std::promise<zkasio::error_code> old_outcome;
  m_old.async_acquire([&](zkasio::error_code ec, lock) { old_outcome.set_value(ec); });
  REQUIRE(poll_until([&] { return proxy.requests_forwarded(ZOO_CREATE2_OP) + proxy.requests_forwarded(ZOO_CREATE_OP) > creates; }, 5000ms));
  std::atomic<bool> busy{false};
  asio::post(m_old.get_executor(), [&, until = free_strand.get_future()] {
    busy = true;
    until.wait();
  });
  REQUIRE(poll_until([&] { return busy.load(); }, 5000ms));
  proxy.pass();
  s.async_exists("/", asio::use_future).get();  // answered after the create: its reply is in

  // The session expires; the next one begins.
  proxy.refuse_connections(true);
  proxy.drop_now();
  REQUIRE(poll_until([&] { return !holder.async_exists("/race-late-marker", asio::use_future).get(); }, 10000ms));
  proxy.refuse_connections(false);
  REQUIRE(poll_until([&] { return s.generation() != generation && s.state() == session_state::connected; }, 10000ms));

  // The next session's contender holds the node.
  held.async_release(asio::use_future).get();
  auto next = m_new.async_acquire_for(10s, asio::use_future).get();
  auto exists_before = proxy.requests_forwarded(ZOO_EXISTS_OP);
  auto deletes_before = proxy.requests_forwarded(ZOO_DELETE_OP);
  free_strand.set_value();
  // The old attempt looks at the node (is it an orphan of its session?) and
  // then waits for its deletion (on the watch the session may share with the
  // holder's monitor); it must not delete it.
  REQUIRE(poll_until([&] { return proxy.requests_forwarded(ZOO_EXISTS_OP) > exists_before; }, 10000ms));
  CHECK_FALSE(poll_until([&] { return proxy.requests_forwarded(ZOO_DELETE_OP) > deletes_before; }, 1000ms));
  CHECK_FALSE(next.lost());
  next.async_release(asio::use_future).get();
  auto old_ec = old_outcome.get_future();
  REQUIRE(old_ec.wait_for(10s) == std::future_status::ready);
  CHECK(old_ec.get() == zk_error::session_expired);
  s.async_close(asio::use_future).get();
  holder.async_close(asio::use_future).get();
}

TEST_CASE_FIXTURE(holder_and_proxied_waiter,
                  "async_leader cancelled (total) while its read's reply is held: operation_aborted at once; the late reply changes nothing, the next look answers right") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    auto path = unique_path("leader-total-" + mode_name);
    election campaigning(holder, path, mode), observing(s, path, mode);
    run(io, [&]() -> awaitable<void> {
      auto leading = co_await campaigning.async_campaign("alpha", use_awaitable);
      auto generation = co_await waiter_connected();
      cancellable<std::optional<leader>> looked(io);
      co_await cancelled_while_reply_held(proxy, looked, [&](auto handler) { observing.async_leader(std::move(handler)); });
      auto who = co_await observing.async_leader(use_awaitable);
      REQUIRE(who);
      CHECK(who->node == leading.node());
      CHECK(who->data == "alpha");
      CHECK(who->fencing_token == leading.fencing_token());
      CHECK(s.generation() == generation);
      co_await leading.async_resign(use_awaitable);
      CHECK(!(co_await observing.async_leader(use_awaitable)));
      CHECK(co_await settles(holder, path, mode, 0));
    }());
  }
}

TEST_CASE("async_leader_changed: a leader other than last_seen completes it at once with that leader; cancelled (total or partial) right after its launch, one that must wait completes with operation_aborted, and the next wait sees the next change") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    two_candidates t("leader-changed-cancel", mode);
    auto& [io, a, b, path, ea, eb] = t;
    run(io, [&]() -> awaitable<void> {
      auto first = co_await ea.async_campaign("alpha", use_awaitable);
      auto seen = co_await eb.async_leader(use_awaitable);
      REQUIRE(seen);
      co_await first.async_resign(use_awaitable);
      auto second = co_await eb.async_campaign("beta", use_awaitable);
      // The leader differs from last_seen: at once (nothing changes after
      // this launch, so a wait for a change would end only at the bound).
      cancellable<std::optional<leader>> at_once(io);
      std::optional<leader> now;
      ea.async_leader_changed(seen, asio::bind_cancellation_slot(at_once.cancel.slot(),
                                                                 [&](zkasio::error_code ec, std::optional<leader> who) {
                                                                   at_once.ec = ec;
                                                                   now = std::move(who);
                                                                   at_once.done.count();
                                                                 }));
      REQUIRE(co_await at_once.done.wait(5s));
      CHECK_FALSE(*at_once.ec);
      REQUIRE(now);
      CHECK(now->node == second.node());
      CHECK(now->data == "beta");
      CHECK(now->fencing_token == second.fencing_token());
      // The leader is last_seen: it must wait; cancelled right after its launch.
      for (auto type : {asio::cancellation_type::total, asio::cancellation_type::partial}) {
        cancellable<std::optional<leader>> waiting(io);
        ea.async_leader_changed(now, waiting.handler());
        waiting.cancel.emit(type);
        REQUIRE(co_await waiting.done.wait(2s));
        CHECK(*waiting.ec == asio::error::operation_aborted);
      }
      // The election goes on: the next wait sees the resignation.
      std::optional<std::optional<leader>> after;
      test_event changed(io.get_executor());
      ea.async_leader_changed(now, [&](zkasio::error_code ec, std::optional<leader> who) {
        CHECK_FALSE(ec);
        after = std::move(who);
        changed.count();
      });
      co_await second.async_resign(use_awaitable);
      REQUIRE(co_await changed.wait(10s));
      CHECK_FALSE(*after);
      CHECK(co_await settles(a, path, mode, 0));
    }());
  }
}

TEST_CASE("an election's observer hears each campaign: acquiring, then granted or failed; resigned: released; deleted by an operator: lost, then released") {
  for (auto mode : both_modes) {
    auto mode_name = name_of(mode);
    CAPTURE(mode_name);
    asio::io_context io;
    session s(io, test_options(shared_hosts())), other(io, test_options(shared_hosts()));
    auto path = unique_path("election-observer-" + mode_name);
    observer_log log;
    election e(s, path, mode, {.observer = log.observer()});
    log.strand = e.get_executor();
    election rival(other, path, mode);
    run(io, [&]() -> awaitable<void> {
      auto first = co_await e.async_campaign("alpha", use_awaitable);
      auto first_node = first.node();
      asio::steady_timer pause(io, 20ms);
      co_await pause.async_wait(use_awaitable);
      co_await first.async_resign(use_awaitable);
      // Another leads: a campaign with a timeout fails.
      auto theirs = co_await rival.async_campaign("rival", use_awaitable);
      auto [late, none] = co_await e.async_campaign_for("beta", 50ms, as_tuple(use_awaitable));
      CHECK(late == error::lock_timeout);
      co_await theirs.async_resign(use_awaitable);
      // Leading again; an operator deletes the node.
      auto second = co_await e.async_campaign("gamma", use_awaitable);
      auto second_node = second.node();
      co_await deleted_by_operator(other, second);
      CHECK(co_await settles(s, path, mode, 0));
      auto& heard = log.events;
      REQUIRE(log.sequence() == "acquiring granted released acquiring failed acquiring granted lost released");
      for (auto& event : heard) CHECK(event.path == path);
      CHECK(heard[1].node == first_node);
      CHECK(heard[2].node == first_node);
      CHECK(heard[2].took >= 20ms);  // held since granted
      CHECK(heard[4].error == error::lock_timeout);
      CHECK(heard[4].took >= 50ms);
      CHECK(heard[4].node.empty());
      CHECK(heard[6].node == second_node);
      CHECK(heard[7].node == second_node);
      CHECK(heard[8].node == second_node);
      CHECK(heard[8].took >= heard[7].took);
    }());
    CHECK(log.on_strand);
  }
}
