// zkasio-sim: runs the deterministic simulation (simulation.hpp) for many
// seeds, or replays one.
//
//   zkasio-sim [--seeds N] [--from S]   seeds S .. S+N-1 (default 1 .. 1,000,000)
//   zkasio-sim --seed S                 one seed, saying what it did
//   zkasio-sim ... --recipe R           the contenders' recipe: shared_mutex (the
//                                       default), mutex, election, race_mutex,
//                                       race_election, local_mutex or semaphore
//   zkasio-sim ... --planted            with the planted fault (a grant without
//                                       the own-node check; in a race, a look-up
//                                       answered "ours"; a local_mutex's hand-over
//                                       to a stopped flow dropped; a semaphore's wait
//                                       for room never told its mutex is lost):
//                                       seeds that catch it
//
// Exit status 0 when every seed held (with --planted: when one caught it).
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "sim/simulation.hpp"

int main(int argc, char** argv) {
  std::uint64_t from = 1, count = 1'000'000;
  bool one = false;
  zkasio::sim::options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::cerr << "zkasio-sim: " << arg << " needs a value\n";
        std::exit(2);
      }
      return std::stoull(argv[++i]);
    };
    if (arg == "--seeds") count = value();
    else if (arg == "--from") from = value();
    else if (arg == "--seed") from = value(), count = 1, one = true, o.trace = true;
    else if (arg == "--planted") o.plant_skip_own_check = true;
    else if (arg == "--recipe" && i + 1 < argc) {
      auto queue = zkasio::sim::recipe_named(argv[++i]);
      if (!queue) {
        std::cerr << "zkasio-sim: --recipe is shared_mutex, mutex, election, race_mutex, race_election, local_mutex or semaphore, not '" << argv[i] << "'\n";
        return 2;
      }
      o.queue = *queue;
    } else {
      std::cerr << "zkasio-sim: unknown option '" << arg
                << "'\nusage: zkasio-sim [--seeds N] [--from S] | --seed S [--recipe R] [--planted]\n";
      return 2;
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::uint64_t failed = 0, grants = 0, faults = 0, stops = 0, steps = 0, ran = 0;
  for (auto seed = from; seed < from + count; ++seed) {
    ++ran;
    auto r = zkasio::sim::run(seed, o);
    grants += r.grants, faults += r.faults, stops += r.stopped, steps += r.steps;
    if (one) std::cout << r.trace;
    if (!r.ok) {
      ++failed;
      std::cout << "seed " << seed << " failed: " << r.failure << " (replay: zkasio-sim --seed " << seed
                << " --recipe " << zkasio::sim::name_of(o.queue) << (o.plant_skip_own_check ? " --planted" : "")
                << ")\n";
      if (!o.plant_skip_own_check || failed >= 3) break;
    } else if (one) {
      std::cout << "seed " << seed << " held: " << r.steps << " steps, " << r.grants << " grants, " << r.faults
                << " faults, " << r.stopped << " stopped\n";
    }
  }
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << zkasio::sim::name_of(o.queue) << ": " << ran << " seeds from " << from << ": " << (ran - failed) << " held, " << failed << " failed; "
            << grants << " grants, " << faults << " faults, " << stops << " stopped, " << steps << " steps in "
            << seconds << " s\n";
  return o.plant_skip_own_check ? (failed > 0 ? 0 : 1) : (failed > 0 ? 1 : 0);
}
