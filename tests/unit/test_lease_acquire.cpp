// A semaphore's acquire of n leases (src/recipes/machines/lease_acquire.hpp) driven by
// scripted events, without a server: the mutex first, the leases made in
// one session, the wait for room; queueing again after the mutex is lost
// while it waits (in the same session) or after an expiry; a try's
// lock_busy; the interleavings a server cannot be made to produce at will
// (a lease answered in a later session than the first; the mutex lost as
// the session expires).
#include <doctest/doctest.h>

#include <asio/error.hpp>
#include <zkasio/error.hpp>

#include "recipes/machines/lease_acquire.hpp"
#include "recipes/rules/decisions.hpp"
#include "scripted.hpp"

using namespace zkasio;
using namespace zkasio::detail;
using la = lease_acquire;

namespace {

constexpr std::uint64_t generation = 5;

la::look now() { return {.generation = generation}; }
la::look next_session() { return {.generation = generation + 1}; }
// A session that will reconnect counts its next generation before it says
// expired; one that will not keeps it (decisions.hpp's queues_again).
la::look next_being_made() { return {.generation = generation + 1, .expired = true}; }
la::look expired_for_good() { return {.generation = generation, .expired = true}; }
la::look closed() { return {.generation = generation, .closed = true}; }

zkasio::error_code lost() { return code(error::lock_lost); }
zkasio::error_code expired() { return code(zk_error::session_expired); }

bool takes_mutex(const la::action& a) { return std::holds_alternative<la::take_mutex>(a); }
std::size_t makes_lease(const la::action& a) {
  REQUIRE(std::holds_alternative<la::make_lease>(a));
  return std::get<la::make_lease>(a).index;
}

// n leases of a semaphore of `max`, started: the mutex first.
la started(std::size_t n = 2, std::size_t max = 3, bool try_once = false, bool requeue = false) {
  la fsm({.count = n, .max = max, .try_once = try_once, .requeue_on_expiry = requeue});
  CHECK(takes_mutex(fsm.start(now())));
  return fsm;
}

// Started, the mutex taken and `n` leases made in its session: it waits for room.
la waiting_for_room(std::size_t n = 2, bool try_once = false, bool requeue = false) {
  auto fsm = started(n, 3, try_once, requeue);
  CHECK(makes_lease(fsm.resume(la::mutex_taken{}, now())) == 0);
  for (std::size_t i = 0; i < n; ++i) {
    auto next = fsm.resume(la::lease_made{{}, generation}, now());
    if (i + 1 < n) CHECK(makes_lease(next) == i + 1);
    else CHECK(std::holds_alternative<la::wait_for_room>(next));
  }
  CHECK(fsm.generation() == generation);
  return fsm;
}

}  // namespace

TEST_CASE("n leases: the mutex, each lease in turn, the wait for room, granted") {
  for (std::size_t n : {1u, 2u, 3u}) {
    auto fsm = waiting_for_room(n);
    CHECK(std::holds_alternative<la::granted>(fsm.resume(la::room_ended{}, now())));
    CHECK(fsm.finished());
  }
}

TEST_CASE("a count outside 1..max: invalid_lease_count, nothing taken") {
  for (auto [n, max] : {std::pair<std::size_t, std::size_t>{0, 3}, {4, 3}, {2, 1}}) {
    la fsm({.count = n, .max = max});
    CHECK(failure<la>(fsm.start(now())) == error::invalid_lease_count);
  }
}

TEST_CASE("the mutex not taken: its failure, as it is (its acquire has ridden through and queued again already)") {
  auto fsm = started();
  CHECK(failure<la>(fsm.resume(la::mutex_taken{code(error::lock_timeout)}, now())) == error::lock_timeout);
  auto busy = started(2, 3, true);
  auto end = busy.resume(la::mutex_taken{code(error::lock_busy)}, now());
  CHECK(failure<la>(end) == error::lock_busy);
  CHECK(std::get<la::fail>(end).after_removal);
}

TEST_CASE("a lease's answer read after its session ended: no lease is made in the session that follows") {
  // A process paused past its session's timeout reads, on waking, the
  // answer of a create made in the old session, the next one connected
  // already (the simulation's schedule that found it made lease 1 in the
  // new session, and the runner left it there).
  auto fsm = started();
  CHECK(makes_lease(fsm.resume(la::mutex_taken{}, now())) == 0);
  CHECK(failure<la>(fsm.resume(la::lease_made{{}, generation}, next_session())) == zk_error::session_expired);
  auto requeued = started(2, 3, false, true);
  CHECK(makes_lease(requeued.resume(la::mutex_taken{}, now())) == 0);
  CHECK(takes_mutex(requeued.resume(la::lease_made{{}, generation}, next_session())));
  CHECK(requeued.generation() == generation + 1);
}

TEST_CASE("a lease made in a later session than the mutex: the mutex went with its session") {
  // Even the first: lost with its mutex, it did not wait beside another
  // acquirer, but it lived through an expiry, which the caller is told of
  // (session_expired) unless it asked to queue again.
  auto first = started();
  CHECK(makes_lease(first.resume(la::mutex_taken{}, now())) == 0);
  CHECK(failure<la>(first.resume(la::lease_made{{}, generation + 1}, next_session())) == zk_error::session_expired);
  auto requeued_first = started(2, 3, false, true);
  CHECK(makes_lease(requeued_first.resume(la::mutex_taken{}, now())) == 0);
  CHECK(takes_mutex(requeued_first.resume(la::lease_made{{}, generation + 1}, next_session())));
}

TEST_CASE("a lease made in a later session than the first: the first went with its session") {
  auto fsm = started();
  CHECK(makes_lease(fsm.resume(la::mutex_taken{}, now())) == 0);
  CHECK(makes_lease(fsm.resume(la::lease_made{{}, generation}, now())) == 1);
  CHECK(failure<la>(fsm.resume(la::lease_made{{}, generation + 1}, next_session())) == zk_error::session_expired);
  // With requeue_on_expiry: a new attempt in the session that follows.
  auto requeued = started(2, 3, false, true);
  CHECK(makes_lease(requeued.resume(la::mutex_taken{}, now())) == 0);
  CHECK(makes_lease(requeued.resume(la::lease_made{{}, generation}, now())) == 1);
  CHECK(takes_mutex(requeued.resume(la::lease_made{{}, generation + 1}, next_session())));
  CHECK(requeued.generation() == generation + 1);
}

TEST_CASE("the mutex lost while it waited for room: again in the same session; after an expiry, as an expired waiter") {
  auto same = waiting_for_room();
  CHECK(takes_mutex(same.resume(la::room_ended{lost(), true}, now())));
  CHECK(makes_lease(same.resume(la::mutex_taken{}, now())) == 0);  // a new attempt: its leases from the first

  auto after_expiry = waiting_for_room();
  CHECK(failure<la>(after_expiry.resume(la::room_ended{lost(), true}, next_session())) == zk_error::session_expired);
  auto being_made = waiting_for_room();
  CHECK(failure<la>(being_made.resume(la::room_ended{lost(), true}, next_being_made())) == zk_error::session_expired);
  auto requeued = waiting_for_room(2, false, true);
  CHECK(takes_mutex(requeued.resume(la::room_ended{lost(), true}, next_being_made())));
  auto for_good = waiting_for_room(2, false, true);
  CHECK(failure<la>(for_good.resume(la::room_ended{lost(), true}, expired_for_good())) == zk_error::session_expired);

  // A try is one look: the mutex lost ends it.
  auto try_once = waiting_for_room(2, true);
  CHECK(failure<la>(try_once.resume(la::room_ended{lost(), true}, now())) == error::lock_lost);
  // One of its leases deleted (the mutex held): lost, not queued again.
  auto lease_gone = waiting_for_room();
  CHECK(failure<la>(lease_gone.resume(la::room_ended{lost(), false}, now())) == error::lock_lost);
}

TEST_CASE("requeue_on_expiry: another attempt in the session that follows, and only then") {
  auto follows = [](la::look then) {
    auto fsm = waiting_for_room(2, false, true);
    return fsm.resume(la::room_ended{expired(), false}, then);
  };
  CHECK(takes_mutex(follows(next_session())));
  CHECK(takes_mutex(follows(next_being_made())));
  CHECK(failure<la>(follows(expired_for_good())) == zk_error::session_expired);
  CHECK(failure<la>(follows(closed())) == zk_error::session_expired);
  auto plain = waiting_for_room();
  CHECK(failure<la>(plain.resume(la::room_ended{expired(), false}, next_session())) == zk_error::session_expired);
  auto try_once = waiting_for_room(2, true, true);
  CHECK(failure<la>(try_once.resume(la::room_ended{expired(), false}, next_session())) == zk_error::session_expired);
  // Cut off in a later session than its leases': that session expired.
  auto cut = waiting_for_room(2, false, true);
  CHECK(takes_mutex(cut.resume(la::room_ended{code(zk_error::connection_loss), false}, next_session())));
  auto cut_plain = waiting_for_room();
  CHECK(failure<la>(cut_plain.resume(la::room_ended{code(zk_error::connection_loss), false}, next_session())) ==
        zk_error::connection_loss);
  // Queued again, it is granted in the new session.
  auto fsm = waiting_for_room(1, false, true);
  CHECK(takes_mutex(fsm.resume(la::room_ended{expired(), false}, next_session())));
  CHECK(makes_lease(fsm.resume(la::mutex_taken{}, next_session())) == 0);
  CHECK(std::holds_alternative<la::wait_for_room>(fsm.resume(la::lease_made{{}, generation + 1}, next_session())));
  CHECK(std::holds_alternative<la::granted>(fsm.resume(la::room_ended{}, next_session())));
}

TEST_CASE("a try without room: lock_busy once its leases are gone; other failures as they are") {
  auto busy = waiting_for_room(2, true);
  auto end = busy.resume(la::room_ended{code(error::lock_busy), false}, now());
  CHECK(failure<la>(end) == error::lock_busy);
  CHECK(std::get<la::fail>(end).after_removal);
  auto timed_out = waiting_for_room();
  end = timed_out.resume(la::room_ended{code(error::lock_timeout), false}, now());
  CHECK(failure<la>(end) == error::lock_timeout);
  CHECK_FALSE(std::get<la::fail>(end).after_removal);
  auto cut = started();
  CHECK(makes_lease(cut.resume(la::mutex_taken{}, now())) == 0);
  CHECK(failure<la>(cut.resume(la::lease_made{code(error::not_connected), generation}, now())) == error::not_connected);
}

TEST_CASE("an event no action waits for is a broken promise: internal_error") {
  auto early = started();
  CHECK(failure<la>(early.resume(la::room_ended{}, now())) == error::internal_error);
  auto leases = started();
  CHECK(makes_lease(leases.resume(la::mutex_taken{}, now())) == 0);
  CHECK(failure<la>(leases.resume(la::mutex_taken{}, now())) == error::internal_error);
  auto done = waiting_for_room();
  CHECK(std::holds_alternative<la::granted>(done.resume(la::room_ended{}, now())));
  CHECK(failure<la>(done.resume(la::room_ended{}, now())) == error::internal_error);
  la unstarted({});
  CHECK(failure<la>(unstarted.resume(la::mutex_taken{}, now())) == error::internal_error);
  la twice({});
  CHECK(takes_mutex(twice.start(now())));
  CHECK(failure<la>(twice.start(now())) == error::internal_error);
}
