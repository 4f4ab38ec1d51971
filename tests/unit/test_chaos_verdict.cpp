// The chaos suite's verdict (tests/chaos/verdict.hpp) on records made up to
// break each rule: it must see two holders at once, tokens out of order and
// late or lost acquires, and must excuse what a process pause explains.
#include <doctest/doctest.h>

#include "chaos/verdict.hpp"

using namespace zkasio::chaos;

namespace {
constexpr ns ms = 1'000'000;
constexpr ns grace = 1000 * ms;
}  // namespace

TEST_CASE("holders one after the other, tokens rising: nothing to report") {
  std::vector<hold_record> holds{{0, 0, 0, 10 * ms, 100, false}, {1, 0, 10 * ms, 20 * ms, 101, false},
                                 {0, 1, 5 * ms, 3000 * ms, 7, true}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.acquisitions == 3);
  CHECK(v.lost_signals == 1);
  CHECK(v.long_holds == 1);
  CHECK(v.overlaps == 0);
  CHECK(v.tokens_out_of_order == 0);
  CHECK(v.examples.empty());
}

TEST_CASE("two holders of one lock at once are an overlap, also across a long earlier hold") {
  // The second hold begins inside the first; the third begins after the
  // second ended but inside the first, which ended last.
  std::vector<hold_record> holds{{0, 0, 0, 100 * ms, 1, false}, {1, 0, 50 * ms, 60 * ms, 2, false},
                                 {2, 0, 70 * ms, 80 * ms, 3, false}, {3, 1, 50 * ms, 60 * ms, 9, false}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.overlaps == 2);
  CHECK(v.examples.size() == 2);
}

TEST_CASE("a later grant with a token not greater is out of order") {
  std::vector<hold_record> holds{{0, 0, 0, 10 * ms, 5, false}, {1, 0, 20 * ms, 30 * ms, 5, false},
                                 {1, 0, 40 * ms, 50 * ms, 4, false}};
  CHECK(judge(holds, {}, {}, grace).tokens_out_of_order == 2);
}

TEST_CASE("a hold during which its process was paused counts up to the pause") {
  // Worker 0 was stopped at 10 ms, its session expired, worker 1 was granted
  // at 7 s; worker 0 woke and saw its loss at 8 s.
  std::vector<hold_record> holds{{0, 0, 0, 8000 * ms, 1, true}, {1, 0, 7000 * ms, 7010 * ms, 2, false}};
  CHECK(judge(holds, {}, {}, grace).overlaps == 1);
  auto v = judge(holds, {}, {{0, 10 * ms, 7900 * ms}}, grace);
  CHECK(v.overlaps == 0);
  CHECK(v.holds_cut_by_pause == 1);
  // A pause of another worker excuses nothing.
  CHECK(judge(holds, {}, {{1, 10 * ms, 7900 * ms}}, grace).overlaps == 1);
}

TEST_CASE("an acquire completing past its deadline and the grace, or never, is late, unless its process was paused") {
  std::vector<acquire_record> acquires{
      {0, 0, 0, 900 * ms, 1000 * ms, "ok"},                  // in time
      {0, 0, 0, 1900 * ms, 1000 * ms, "lock_timeout"},       // within the grace
      {1, 0, 0, 2100 * ms, 1000 * ms, "lock_timeout"},       // late
      {2, 1, 0, std::nullopt, 1000 * ms, "pending"},          // never completed
      {3, 1, 0, 9000 * ms, 1000 * ms, "session_expired"},    // late, but its worker was paused
  };
  auto v = judge({}, acquires, {{3, 500 * ms, 8000 * ms}}, grace);
  CHECK(v.late_acquires == 2);
  CHECK(v.acquire_failures == 4);
}

TEST_CASE("log lines read back as written; a line it cannot read is set apart") {
  worker_log log;
  hold_record h{2, 1, 123, 456, 789, true};
  acquire_record a{2, 1, 100, 200, 300, "ok"}, pending{3, 0, 100, std::nullopt, 300, "pending"};
  parse_line(format(h), log);
  parse_line(format(a), log);
  parse_line(format(pending), log);
  parse_line("orphans 2 0", log);
  parse_line("hold 1 2 3", log);
  parse_line("acquire 1 2 3 4x 5 ok", log);
  parse_line("hold 1 2 3 4 5 0 extra", log);
  parse_line("something else", log);
  REQUIRE(log.holds.size() == 1);
  CHECK(log.holds[0].token == 789);
  CHECK(log.holds[0].lost);
  REQUIRE(log.acquires.size() == 2);
  CHECK(log.acquires[0].end == 200);
  CHECK_FALSE(log.acquires[1].end);
  CHECK(log.orphans == 0);
  CHECK(log.bad_lines.size() == 4);
}
