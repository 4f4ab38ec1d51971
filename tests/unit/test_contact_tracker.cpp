// contact_tracker: what a session's replies prove of the leader's sight of
// it (no server). Times are scripted; the lag is a tick of 200 ms.
#include <doctest/doctest.h>

#include "session/contact_tracker.hpp"

using zkasio::detail::contact_tracker;
using namespace std::chrono_literals;

namespace {

using time_point = contact_tracker::time_point;
constexpr auto lag = 200ms;
const time_point t0{1h};

}  // namespace

TEST_CASE("a handshake proves itself; a sync's answer proves only what was answered a lag before it was sent") {
  contact_tracker c;
  c.connected(t0);
  CHECK(c.certified() == t0);
  // The first heartbeat (sent at +500, answered at +501): answered through a
  // follower that may be cut off before its next ping, it proves nothing yet.
  c.answered(t0 + 500ms, t0 + 501ms, true, lag);
  CHECK(c.certified() == t0);
  // The next one, sent more than a lag after that answer: a ping reached the
  // follower between the two, and its reply went to the leader before this
  // sync did. The leader touched the session after +500.
  c.answered(t0 + 1000ms, t0 + 1001ms, true, lag);
  CHECK(c.certified() == t0 + 500ms);
  c.answered(t0 + 1500ms, t0 + 1501ms, true, lag);
  CHECK(c.certified() == t0 + 1000ms);
}

TEST_CASE("the sequence a review reproduced: the follower cut off right after answering a heartbeat") {
  // A holder idle on a follower, heartbeats a third of a 4 s timeout apart
  // (the old period); the follower paused the moment the heartbeat at +2667
  // was answered. Before, last_contact said +2667, and the lost signal came
  // at +2667 + 4 s - margin, while the leader, whose last touch came with the
  // ping after +1333's heartbeat, expired the session at about +1333 + 4 s:
  // two holders for about a second. Now last_contact says +1333.
  contact_tracker c;
  c.connected(t0);
  c.answered(t0 + 1333ms, t0 + 1334ms, true, lag);
  c.answered(t0 + 2667ms, t0 + 2668ms, true, lag);
  CHECK(c.certified() == t0 + 1333ms);
  CHECK(c.certified() + 4s - 200ms < t0 + 1333ms + 4s);  // told before the leader's earliest expiry
}

TEST_CASE("reads prove a contact too, once a request through the leader certifies them; one too close proves nothing") {
  contact_tracker c;
  c.connected(t0);
  c.answered(t0 + 100ms, t0 + 101ms, false, lag);  // a read: the follower touched the session
  c.answered(t0 + 250ms, t0 + 252ms, false, lag);
  // A write sent 149 ms after the first read's answer: too soon, a ping may
  // not have come between.
  c.answered(t0 + 250ms, t0 + 260ms, true, lag);
  CHECK(c.certified() == t0);
  // Reads certify nothing by themselves.
  c.answered(t0 + 600ms, t0 + 601ms, false, lag);
  CHECK(c.certified() == t0);
  // A sync sent at +455: a lag after both reads' answers.
  c.answered(t0 + 455ms, t0 + 470ms, true, lag);
  CHECK(c.certified() == t0 + 250ms);
  CHECK(c.answered_since(t0 + 251ms) == t0 + 601ms);  // the read sent at +600: a sync a lag after it
}

TEST_CASE("a new connection forgets what the server before saw and did not report") {
  contact_tracker c;
  c.connected(t0);
  c.answered(t0 + 500ms, t0 + 501ms, true, lag);
  // Cut off; reconnected (maybe to another server) at +3000: its handshake
  // proves +3000. What the first server saw at +500 may never reach the
  // leader, and no later answer certifies it.
  c.connected(t0 + 3000ms);
  CHECK(c.certified() == t0 + 3000ms);
  c.answered(t0 + 3500ms, t0 + 3501ms, true, lag);
  CHECK(c.certified() == t0 + 3000ms);
  c.answered(t0 + 4000ms, t0 + 4001ms, true, lag);
  CHECK(c.certified() == t0 + 3500ms);
}

TEST_CASE("kept contacts are bounded: merged (a quarter lag each) so that none is certified sooner than it proves") {
  contact_tracker c;
  c.connected(t0);
  // A thousand reads answered a millisecond apart: at most a few are kept.
  for (int i = 1; i <= 1000; ++i)
    c.answered(t0 + std::chrono::milliseconds(i), t0 + std::chrono::milliseconds(i) + 1ms, false, lag);
  // A sync sent at +1000 certifies at least what was answered by +800
  // (merged entries are certified no earlier than their latest answer),
  // never what was answered after +800.
  c.answered(t0 + 1000ms, t0 + 1001ms, true, lag);
  CHECK(c.certified() <= t0 + 799ms);
  CHECK(c.certified() >= t0 + 700ms);
  // And later everything up to the last read.
  c.answered(t0 + 1300ms, t0 + 1301ms, true, lag);
  CHECK(c.certified() >= t0 + 1000ms);
}

TEST_CASE("answered_since names the answer a confirmation waits a lag after") {
  contact_tracker c;
  c.connected(t0);
  CHECK(c.answered_since(t0 + 1ms) == time_point::max());  // nothing sent since: a beat now
  c.answered(t0 + 10ms, t0 + 12ms, true, lag);
  CHECK(c.answered_since(t0 + 5ms) == t0 + 12ms);
  CHECK(c.answered_since(t0 + 11ms) == time_point::max());
}
