// The deterministic simulation (tests/sim/simulation.hpp): the fair queue's
// state machine, the race recipes', the in-process handoff's and the
// semaphore's, the real code, against a model of
// the server under random schedules of faults, for thousands of seeds; and
// shown to catch a planted fault. zkasio-sim runs a million (README,
// Reliability).
#include <doctest/doctest.h>

#include "sim/simulation.hpp"

namespace {

using zkasio::sim::options;

// Under the sanitizers a quarter of the seeds (the simulation is all
// computation: ASan's run of every seed once outlasted its 300 s on a
// loaded machine); the default stage runs them all. Every seed has more
// than 5 grants and 5 faults on average.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t seed_divisor = 4;
#else
constexpr std::uint64_t seed_divisor = 1;
#endif
constexpr std::uint64_t seeds(std::uint64_t n) { return n / seed_divisor; }

// The grants of seeds 1 .. `seeds` of `queue`'s contenders; a seed that
// breaks a guarantee fails the test, saying how to replay it.
std::uint64_t grants_in(options::recipe queue, std::uint64_t seeds) {
  CAPTURE(zkasio::sim::name_of(queue));
  options o;
  o.queue = queue;
  std::uint64_t grants = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto r = zkasio::sim::run(seed, o);
    grants += r.grants;
    if (!r.ok)
      FAIL("seed ", seed, ": ", r.failure, " (replay: zkasio-sim --seed ", seed, " --recipe ",
           zkasio::sim::name_of(queue), ")");
  }
  return grants;
}

// Whether the planted fault breaks a guarantee within seeds 1 .. 2,000.
bool planted_fault_caught(options::recipe queue) {
  options planted;
  planted.queue = queue;
  planted.plant_skip_own_check = true;
  for (std::uint64_t seed = 1; seed <= 2000; ++seed)
    if (!zkasio::sim::run(seed, planted).ok) return true;
  return false;
}

}  // namespace

TEST_CASE("the simulation: 10,000 seeds of contenders under faults hold every guarantee") {
  std::uint64_t grants = 0, faults = 0;
  for (std::uint64_t seed = 1; seed <= seeds(10'000); ++seed) {
    auto r = zkasio::sim::run(seed);
    grants += r.grants;
    faults += r.faults;
    if (!r.ok) FAIL("seed ", seed, ": ", r.failure, " (replay: zkasio-sim --seed ", seed, ")");
  }
  MESSAGE(grants, " grants, ", faults, " faults");
  CHECK(grants > 5 * seeds(10'000));
  CHECK(faults > 5 * seeds(10'000));
}

TEST_CASE("the simulation: 3,000 seeds each of a mutex's contenders and an election's candidates") {
  for (auto queue : {options::recipe::mutex, options::recipe::election})
    CHECK(grants_in(queue, seeds(3'000)) > 5 * seeds(3'000));
}

TEST_CASE("the simulation: 3,000 seeds each of a race_mutex's contenders and a race-mode election's candidates") {
  for (auto queue : {options::recipe::race_mutex, options::recipe::race_election})
    CHECK(grants_in(queue, seeds(3'000)) > 5 * seeds(3'000));
}

TEST_CASE("the simulation: 3,000 seeds of a local_mutex's lock objects handing the lock over in memory") {
  CHECK(grants_in(options::recipe::local_mutex, seeds(3'000)) > 5 * seeds(3'000));
}

TEST_CASE("the simulation: 3,000 seeds of a semaphore's contenders, each asking for 1..N leases") {
  CHECK(grants_in(options::recipe::semaphore, seeds(3'000)) > 5 * seeds(3'000));
}

TEST_CASE("the simulation catches a planted fault: a grant without the check of the waiter's own node") {
  CHECK(planted_fault_caught(options::recipe::shared_mutex));
}

TEST_CASE("the simulation catches a planted fault in a race: a look-up of the node at the path answered \"ours\"") {
  for (auto queue : {options::recipe::race_mutex, options::recipe::race_election}) {
    CAPTURE(zkasio::sim::name_of(queue));
    CHECK(planted_fault_caught(queue));
  }
}

TEST_CASE("the simulation catches a planted fault in the local run: a hand-over to a stopped acquire dropped") {
  CHECK(planted_fault_caught(options::recipe::local_mutex));
}

TEST_CASE("the simulation catches a planted fault in a semaphore: a wait for room never told its mutex is lost") {
  CHECK(planted_fault_caught(options::recipe::semaphore));
}
