// An acquire of a fair queue around its attempts (src/recipes/machines/acquire_flow.hpp)
// driven by scripted events, without a server: reentry, the local run
// (local_handoff: lead, line, lock or lead handed over), queueing again after
// an expiry, lock_busy, and the deadline or the caller's cancellation in
// every state, with the interleavings no server can be made to produce at
// will: the lead or the lock handed over in the tick the deadline fires, a
// late reply of what was stopped, the lead or the lock handed over across an
// expiry.
#include <doctest/doctest.h>

#include <asio/error.hpp>
#include <zkasio/error.hpp>

#include "recipes/machines/acquire_flow.hpp"
#include "recipes/rules/decisions.hpp"
#include "scripted.hpp"

using namespace zkasio;
using namespace zkasio::detail;
using af = acquire_flow;

namespace {

constexpr std::uint64_t generation = 3;

af::look connected(bool run_active = false) { return {.generation = generation, .run_active = run_active}; }
af::look disconnected() { return {.generation = generation, .connected = false}; }
// A session that will reconnect counts its next generation before it says
// expired (session_impl.cpp); one that will not keeps it.
af::look next_being_made() { return {.generation = generation + 1, .connected = false, .expired = true}; }
af::look expired_for_good() { return {.generation = generation, .connected = false, .expired = true}; }
af::look next_session() { return {.generation = generation + 1}; }
af::look closed_session() { return {.generation = generation, .connected = false, .closed = true}; }

zkasio::error_code timed_out() { return code(error::lock_timeout); }
zkasio::error_code aborted() { return asio::error::operation_aborted; }

// A lock object with local_handoff whose run someone leads: the acquire
// waits in its line.
af waiting_in_run(af::request r = {.local_run = true}) {
  af flow(r);
  CHECK(std::holds_alternative<af::wait_in_run>(flow.start(connected(true))));
  CHECK(flow.waiting_in_run());
  CHECK_FALSE(flow.leads());
  return flow;
}

bool attempts(const af::action& a) { return std::holds_alternative<af::attempt>(a); }

}  // namespace

TEST_CASE("without a local run: one attempt, granted when it is") {
  af flow({});
  REQUIRE(attempts(flow.start(connected())));
  CHECK_FALSE(flow.leads());
  CHECK(std::holds_alternative<af::granted>(flow.resume(af::attempt_ended{{}, generation}, connected())));
  CHECK(flow.finished());
}

TEST_CASE("reentry by owner: granted again, lost, a would-be deadlock, a downgrade's attempt") {
  af again({.holds = af::reentry::again});
  CHECK(std::holds_alternative<af::granted_again>(again.start(connected())));
  CHECK(again.finished());
  af lost({.holds = af::reentry::lost});
  CHECK(failure<af>(lost.start(connected())) == error::lock_lost);
  af deadlock({.holds = af::reentry::deadlock});
  CHECK(failure<af>(deadlock.start(connected())) == error::would_deadlock);
  // A downgrade queues a node, and is never queued again after an expiry:
  // its write node went with the session.
  af downgrade({.requeue_on_expiry = true, .holds = af::reentry::downgrade});
  CHECK(downgrade.downgrade());
  CHECK(attempts(downgrade.start(connected())));
  CHECK(failure<af>(downgrade.resume(af::attempt_ended{code(zk_error::session_expired), generation}, next_session())) ==
        zk_error::session_expired);
}

TEST_CASE("an attempt's failure: lock_busy once its node is gone, others as they are") {
  af busy({.try_once = true});
  CHECK(attempts(busy.start(connected())));
  auto end = busy.resume(af::attempt_ended{code(error::lock_busy), generation}, connected());
  CHECK(failure<af>(end) == error::lock_busy);
  CHECK(std::get<af::fail>(end).after_removal);
  af lost({});
  CHECK(attempts(lost.start(connected())));
  end = lost.resume(af::attempt_ended{code(error::lock_lost), generation}, connected());
  CHECK(failure<af>(end) == error::lock_lost);
  CHECK_FALSE(std::get<af::fail>(end).after_removal);
}

TEST_CASE("requeue_on_expiry: another attempt in the session that follows, and only then") {
  auto expired = code(zk_error::session_expired);
  auto after = [&](af::request r, af::look now) {
    af flow(r);
    CHECK(attempts(flow.start(connected())));
    return flow.resume(af::attempt_ended{expired, generation}, now);
  };
  af::request requeue{.requeue_on_expiry = true};
  CHECK(attempts(after(requeue, next_session())));    // a new session already
  CHECK(attempts(after(requeue, next_being_made())));
  CHECK(failure<af>(after(requeue, expired_for_good())) == zk_error::session_expired);
  CHECK(failure<af>(after(requeue, closed_session())) == zk_error::session_expired);
  CHECK(failure<af>(after({}, next_session())) == zk_error::session_expired);
  CHECK(failure<af>(after({.try_once = true, .requeue_on_expiry = true}, next_session())) == zk_error::session_expired);
  // Cut off in a later session than its node's: the C client's way of saying
  // that session expired (what was in flight fails with connection_loss).
  auto cut = code(zk_error::connection_loss);
  auto cut_in = [&](af::request r, af::look now) {
    af flow(r);
    CHECK(attempts(flow.start(connected())));
    return flow.resume(af::attempt_ended{cut, generation}, now);
  };
  CHECK(attempts(cut_in(requeue, next_session())));
  CHECK(failure<af>(cut_in(requeue, connected())) == zk_error::connection_loss);  // its own session: not an expiry
  CHECK(failure<af>(cut_in({}, next_session())) == zk_error::connection_loss);
  // Queued again, the attempt that follows is granted.
  af flow(requeue);
  CHECK(attempts(flow.start(connected())));
  CHECK(attempts(flow.resume(af::attempt_ended{expired, generation}, next_session())));
  CHECK(std::holds_alternative<af::granted>(flow.resume(af::attempt_ended{{}, generation + 1}, next_session())));
}

TEST_CASE("the local run idle: the acquire leads it, and its grant takes the lead to the hold") {
  af flow({.local_run = true});
  REQUIRE(attempts(flow.start(connected(false))));
  CHECK(flow.leads());
  CHECK(std::holds_alternative<af::granted>(flow.resume(af::attempt_ended{{}, generation}, connected(true))));
  CHECK_FALSE(flow.leads());
}

TEST_CASE("the local run led by another: a try is busy at once, with nothing queued") {
  af flow({.try_once = true, .local_run = true});
  auto end = flow.start(connected(true));
  CHECK(failure<af>(end) == error::lock_busy);
  CHECK_FALSE(std::get<af::fail>(end).after_removal);
}

TEST_CASE("waiting in the local run: handed the lock in memory, it completes with it while the lock's session lives") {
  // (The lock handed over is the run's hold's: if that is lost, its own lost
  // signal tells the new holder, as it tells any grant of the hold.)
  for (auto now : {connected(true), disconnected()}) {
    auto flow = waiting_in_run();
    CHECK(std::holds_alternative<af::take_handed>(flow.resume(af::handed{.lock = true, .generation = generation}, now)));
    CHECK(flow.finished());
  }
}

TEST_CASE("handed a lock that may be lost or whose session has ended: the waiter leads the run instead") {
  // A process paused past its session's timeout wakes to the hand-over, the
  // next session connected already (the simulation found it granted).
  auto lock_of_old = af::handed{.lock = true, .generation = generation};
  auto plain = waiting_in_run();
  CHECK(failure<af>(plain.resume(lock_of_old, next_session())) == zk_error::session_expired);
  CHECK_FALSE(plain.leads());

  auto requeued = waiting_in_run({.local_run = true, .requeue_on_expiry = true});
  CHECK(attempts(requeued.resume(lock_of_old, next_session())));
  CHECK(requeued.leads());

  auto across = waiting_in_run();
  CHECK(std::holds_alternative<af::connect>(across.resume(lock_of_old, next_being_made())));
  CHECK(across.leads());

  // The session expired for good, or closed (no next session, the same
  // generation), or the lock may be lost (hold_sure: the monitor's loss,
  // the session past its sure time): not granted either (a review's
  // finding). It leads, and its attempt meets what the session says.
  for (auto now : {expired_for_good(), closed_session()}) {
    auto ended = waiting_in_run();
    CHECK(std::holds_alternative<af::connect>(ended.resume(lock_of_old, now)));
    CHECK(ended.leads());
  }
  auto unsure = waiting_in_run();
  CHECK(attempts(unsure.resume(af::handed{.lock = true, .generation = generation, .sure = false}, connected(true))));
  CHECK(unsure.leads());

  // Joined the line in the new session, behind a holder of the old one
  // that released: it leads, and attempts in its own session.
  af joined_late({.local_run = true});
  CHECK(std::holds_alternative<af::wait_in_run>(joined_late.start({.generation = generation + 1, .run_active = true})));
  CHECK(attempts(joined_late.resume(lock_of_old, next_session())));
  CHECK(joined_late.leads());
}

TEST_CASE("handed the lead: it attempts at once when connected, else once connected") {
  auto now = waiting_in_run();
  REQUIRE(attempts(now.resume(af::handed{.lock = false}, connected(true))));
  CHECK(now.leads());
  CHECK(std::holds_alternative<af::granted>(now.resume(af::attempt_ended{{}, generation}, connected(true))));

  auto later = waiting_in_run();
  CHECK(std::holds_alternative<af::connect>(later.resume(af::handed{}, disconnected())));
  CHECK(later.leads());
  CHECK(attempts(later.resume(af::connected{}, connected(true))));

  auto never = waiting_in_run();
  CHECK(std::holds_alternative<af::connect>(never.resume(af::handed{}, disconnected())));
  CHECK(failure<af>(never.resume(af::connected{code(error::session_closed)}, closed_session())) == error::session_closed);
  CHECK_FALSE(never.leads());  // it goes on to the next waiter
}

TEST_CASE("handed the lead after the session it waited in expired: its place went with it, unless it queues again") {
  auto plain = waiting_in_run();
  CHECK(failure<af>(plain.resume(af::handed{}, next_session())) == zk_error::session_expired);
  CHECK_FALSE(plain.leads());

  auto requeued = waiting_in_run({.local_run = true, .requeue_on_expiry = true});
  CHECK(attempts(requeued.resume(af::handed{}, next_session())));
  CHECK(requeued.leads());

  // Handed while the new session is being made, then connected in it.
  auto across = waiting_in_run({.local_run = true, .requeue_on_expiry = true});
  CHECK(std::holds_alternative<af::connect>(across.resume(af::handed{}, next_being_made())));
  CHECK(attempts(across.resume(af::connected{}, next_session())));

  auto unrequeued = waiting_in_run();
  CHECK(std::holds_alternative<af::connect>(unrequeued.resume(af::handed{}, next_being_made())));
  CHECK(failure<af>(unrequeued.resume(af::connected{}, next_session())) == zk_error::session_expired);

  // Handed as the session expired for good: no session follows.
  auto ended = waiting_in_run({.local_run = true, .requeue_on_expiry = true});
  CHECK(std::holds_alternative<af::connect>(ended.resume(af::handed{}, expired_for_good())));
  CHECK(failure<af>(ended.resume(af::connected{code(zk_error::session_expired)}, expired_for_good())) ==
        zk_error::session_expired);
}

TEST_CASE("the lead or the lock handed over in the tick the deadline fires goes on to the next waiter") {
  // The deadline's handler runs first; the hand-over, posted in the same
  // tick, comes after the acquire ended: it must not be dropped (that
  // wedged a lock object for ever).
  for (bool lock : {false, true}) {
    auto flow = waiting_in_run();
    CHECK(failure<af>(flow.resume(af::stopped{timed_out()}, connected(true))) == error::lock_timeout);
    CHECK(std::holds_alternative<af::pass_on>(flow.resume(af::handed{.lock = lock, .generation = generation}, connected(true))));
    CHECK_FALSE(flow.leads());
  }
}

TEST_CASE("stopped in every state: it fails with the stop's reason, the lead goes on, and late replies are dropped") {
  auto stop_then = [](af flow, af::look now, af::event late) {
    CHECK(failure<af>(flow.resume(af::stopped{aborted()}, now)) == asio::error::operation_aborted);
    CHECK(flow.finished());
    CHECK_FALSE(flow.leads());
    CHECK(std::holds_alternative<af::keep_waiting>(flow.resume(late, now)));
    CHECK(std::holds_alternative<af::keep_waiting>(flow.resume(af::stopped{timed_out()}, now)));  // stopped twice
  };
  SUBCASE("waiting in the run") { stop_then(waiting_in_run(), connected(true), af::connected{}); }
  SUBCASE("waiting for the connection, with the lead") {
    auto flow = waiting_in_run();
    CHECK(std::holds_alternative<af::connect>(flow.resume(af::handed{}, disconnected())));
    stop_then(std::move(flow), disconnected(), af::connected{});
  }
  SUBCASE("attempting, leading the run") {
    af flow({.local_run = true});
    CHECK(attempts(flow.start(connected(false))));
    stop_then(std::move(flow), connected(true), af::attempt_ended{{}, generation});
  }
  SUBCASE("attempting, without a run") {
    af flow({});
    CHECK(attempts(flow.start(connected())));
    stop_then(std::move(flow), connected(), af::attempt_ended{code(error::lock_lost), generation});
  }
  SUBCASE("attempting again after an expiry") {
    af flow({.requeue_on_expiry = true});
    CHECK(attempts(flow.start(connected())));
    CHECK(attempts(flow.resume(af::attempt_ended{code(zk_error::session_expired), generation}, next_session())));
    stop_then(std::move(flow), next_session(), af::attempt_ended{{}, generation + 1});
  }
}

TEST_CASE("an event no action waits for is a broken promise: internal_error") {
  auto handed_while_attempting = af({});
  CHECK(attempts(handed_while_attempting.start(connected())));
  CHECK(failure<af>(handed_while_attempting.resume(af::handed{}, connected())) == error::internal_error);

  auto ended_while_waiting = waiting_in_run();
  CHECK(failure<af>(ended_while_waiting.resume(af::attempt_ended{{}, generation}, connected(true))) ==
        error::internal_error);
  CHECK_FALSE(ended_while_waiting.leads());

  auto connected_while_waiting = waiting_in_run();
  CHECK(failure<af>(connected_while_waiting.resume(af::connected{}, connected(true))) == error::internal_error);

  af unstarted({});
  CHECK(failure<af>(unstarted.resume(af::connected{}, connected())) == error::internal_error);
  af twice({});
  CHECK(attempts(twice.start(connected())));
  CHECK(failure<af>(twice.start(connected())) == error::internal_error);
}
