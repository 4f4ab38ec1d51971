// busy_backoff: the pause before asking a busy server again (no server).
#include <doctest/doctest.h>

#include "recipes/rules/busy_backoff.hpp"


using zkasio::detail::busy_backoff;
using namespace std::chrono_literals;

TEST_CASE("busy answers in a row double the pause up to the most; a quiet spell starts it again") {
  busy_backoff backoff(10ms, 80ms);
  busy_backoff::clock::time_point now{1h};
  CHECK(backoff.next(now) - now == 10ms);
  // Each asked again after its pause, and busy again.
  now += 10ms;
  CHECK(backoff.next(now) - now == 20ms);
  now += 20ms;
  CHECK(backoff.next(now) - now == 40ms);
  now += 40ms;
  CHECK(backoff.next(now) - now == 80ms);
  now += 80ms;
  CHECK(backoff.next(now) - now == 80ms);  // no further
  // Answered at last; busy again much later: from the first pause.
  now += 10s;
  CHECK(backoff.next(now) - now == 10ms);
}

TEST_CASE("busy answers during a pause (one shared listing answered busy) end with that pause, so that all ask again together") {
  busy_backoff backoff(10ms, 1s);
  busy_backoff::clock::time_point now{1h};
  CHECK(backoff.next(now) - now == 10ms);
  CHECK(backoff.next(now) - now == 10ms);
  CHECK(backoff.next(now + 4ms) == now + 10ms);  // the same end
  // Asked again together, busy again: one doubling for all.
  now += 10ms;
  CHECK(backoff.next(now) - now == 20ms);
  CHECK(backoff.next(now + 1ms) == now + 20ms);
}

TEST_CASE("a round trip slower than a few pauses (a loaded machine) does not break the run") {
  busy_backoff backoff(10ms, 1s);
  busy_backoff::clock::time_point now{1h};
  CHECK(backoff.next(now) - now == 10ms);
  now += 300ms;  // the pause, then a slow round trip, then busy again
  CHECK(backoff.next(now) - now == 20ms);
  now += 900ms;
  CHECK(backoff.next(now) - now == 40ms);
  now += 40ms + 1001ms;  // quiet for longer than the most after the pause
  CHECK(backoff.next(now) - now == 10ms);
}
