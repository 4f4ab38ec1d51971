// The deterministic simulation (tests/sim/simulation.hpp): the fair queue's
// state machine, the real code, against a model of the server under random
// schedules of faults, for thousands of seeds; and shown to catch a planted
// fault. zkasio-sim runs a million (README, Reliability).
#include <doctest/doctest.h>

#include "sim/simulation.hpp"

TEST_CASE("the simulation: 10,000 seeds of contenders under faults hold every guarantee") {
  std::uint64_t grants = 0, faults = 0;
  for (std::uint64_t seed = 1; seed <= 10'000; ++seed) {
    auto r = zkasio::sim::run(seed);
    grants += r.grants;
    faults += r.faults;
    if (!r.ok) FAIL("seed ", seed, ": ", r.failure, " (replay: zkasio-sim --seed ", seed, ")");
  }
  MESSAGE(grants, " grants, ", faults, " faults");
  CHECK(grants > 50'000);
  CHECK(faults > 50'000);
}

TEST_CASE("the simulation: 3,000 seeds each of a mutex's contenders and an election's candidates") {
  for (auto queue : {zkasio::sim::options::recipe::mutex, zkasio::sim::options::recipe::election}) {
    CAPTURE(zkasio::sim::name_of(queue));
    zkasio::sim::options o;
    o.queue = queue;
    std::uint64_t grants = 0;
    for (std::uint64_t seed = 1; seed <= 3'000; ++seed) {
      auto r = zkasio::sim::run(seed, o);
      grants += r.grants;
      if (!r.ok)
        FAIL("seed ", seed, ": ", r.failure, " (replay: zkasio-sim --seed ", seed, " --recipe ",
             zkasio::sim::name_of(queue), ")");
    }
    CHECK(grants > 15'000);
  }
}

TEST_CASE("the simulation catches a planted fault: a grant without the check of the waiter's own node") {
  int caught = 0;
  zkasio::sim::options planted;
  planted.plant_skip_own_check = true;
  for (std::uint64_t seed = 1; seed <= 2000 && caught == 0; ++seed) caught += !zkasio::sim::run(seed, planted).ok;
  CHECK(caught > 0);
}
