// zkasio-bench: latency of ZooKeeper operations and of the lock, against a
// running server (bench/run starts one and compares systems).
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "latency.hpp"

namespace {

const char* usage =
    "usage: zkasio-bench SUBCOMMAND [--hosts H] [options] [--samples DIR] [--json]\n"
    "subcommands:\n"
    "  floor --rounds N   the raw C client with poll(): create, get_children, exists,\n"
    "                     delete, notify (a delete in one session seen by a watch in\n"
    "                     another), pipelined_create_get_children\n"
    "  ops --rounds N     the same operations through zkasio::session\n"
    "  ops-vs-floor --rounds N [--batches B]\n"
    "                     floor and ops in B alternating batches, and the ratio of p50s\n"
    "  handoff --rounds N [--recipe mutex|rw|semaphore] [--processes 1|2]\n"
    "                     two sessions ping-pong one lock (the holder keeps it 2 ms):\n"
    "                     handoff = the waiter's grant - the holder's release; the lock\n"
    "                     is the mutex, a shared_mutex's write lock or a semaphore's lease;\n"
    "                     the two players are coroutines of one process (1), or this\n"
    "                     process and a forked one (2)\n"
    "  uncontended --rounds N\n"
    "                     acquire_release: one acquire and its release, nobody else;\n"
    "                     allocations_per_acquire_release and allocations_per_exists:\n"
    "                     operator new calls per round, warm\n"
    "  throughput --contenders C --sessions S --seconds D --hold-us H\n"
    "             [--local-handoff MAX_RUN [--max-time-ms T]] [--foreign]\n"
    "                     C coroutines over S sessions loop on one lock for D seconds:\n"
    "                     acquisitions_per_s and handoff; with --local-handoff, each\n"
    "                     session's mutex hands over in memory (max_time T, 50 ms);\n"
    "                     --foreign adds a contender on a session of its own that\n"
    "                     acquires, releases and pauses 5 ms in a loop: foreign_wait\n"
    "                     (its acquires' latency; not in acquisitions_per_s)\n"
    "  read-heavy --contenders C --sessions S --seconds D --hold-us H\n"
    "                     C coroutines over S sessions loop on one shared_mutex, every\n"
    "                     11th a writer (10 readers : 1 writer): reads_per_s,\n"
    "                     writes_per_s, acquisitions_per_s\n"
    "  scale --waiters W --locks L [--sessions S] [--waiter coroutine|callback]\n"
    "                     W waiters on one thread queue on L locks, then drain: waiters,\n"
    "                     granted, in_order, threads, rss_bytes_per_waiter, drain_s;\n"
    "                     each waiter a coroutine (default) or plain completion\n"
    "                     handlers (the library's cost alone);\n"
    "                     exits 1 unless every waiter got its lock once, in order\n"
    "  soak --waiters W --sessions S --acquisitions N [--cut-every-ms C]\n"
    "                     rounds of W waiters queued on one lock over S sessions,\n"
    "                     through a proxy, drained, until N acquisitions, every\n"
    "                     connection cut every C ms (3000): rounds granted once in\n"
    "                     order, connection_cuts, nodes_left, sessions_lived, RSS\n"
    "                     and heap in use after the first round and at the end,\n"
    "                     RSS after malloc_trim at the end\n"
    "                     (a line per round on stderr); exits 1 unless\n"
    "                     every round was granted once in order and nothing is left\n"
    "  herd --waiters W --rounds N [--recipe mutex|race]\n"
    "                     a holder and W waiters, each on its own session, on the\n"
    "                     fair mutex or the race mutex; per release, once every\n"
    "                     watch is in place: handoff, notifications_per_release (the\n"
    "                     server's watchers of the deleted node), requests_per_grant\n"
    "                     (the server's packets received, pings included),\n"
    "                     releaser_won_again (fraction)\n"
    "  global-lock --sessions S --threads T --rounds N\n"
    "                     S sessions on one io_context, each looping on sync +\n"
    "                     get_data of its own node, on 1 thread and then on T:\n"
    "                     ops_per_s, latencies and the process-wide C-client lock's\n"
    "                     use (scopes and wait per operation, contended and held\n"
    "                     fractions, longest hold, longest hold while closing)\n"
    "--hosts defaults to $ZKASIO_HOSTS, then 127.0.0.1:2181; latencies are in\n"
    "microseconds; --json prints one JSON object and nothing else on stdout;\n"
    "--samples DIR also writes each latency's samples to DIR/<key>.txt.\n";

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "zkasio-bench: " << what << "\n" << usage;
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << usage;
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  zkasio::bench::options o;
  const char* env = std::getenv("ZKASIO_HOSTS");
  o.hosts = env && *env ? env : "127.0.0.1:2181";
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg + " needs a value");
      return argv[++i];
    };
    auto number = [&](double low, double high) {
      auto text = value();
      char* end = nullptr;
      double n = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !(n >= low && n <= high))
        fail(arg + " must be a number from " + std::to_string(static_cast<long>(low)) + " to " +
             std::to_string(static_cast<long>(high)) + ", not '" + text + "'");
      return n;
    };
    auto whole = [&](long low, long high) {
      double n = number(static_cast<double>(low), static_cast<double>(high));
      if (n != static_cast<double>(static_cast<long>(n))) fail(arg + " must be a whole number");
      return static_cast<int>(n);
    };
    if (arg == "--hosts") o.hosts = value();
    else if (arg == "--rounds") o.rounds = whole(1, 10'000'000);
    else if (arg == "--batches") o.batches = whole(1, 1000);
    else if (arg == "--contenders") o.contenders = whole(1, 100'000);
    // The server accepts 60 connections per address by default.
    else if (arg == "--sessions") o.sessions = whole(1, 50);
    else if (arg == "--seconds") o.seconds = number(0.001, 3600);
    else if (arg == "--hold-us") o.hold_us = whole(0, 10'000'000);
    else if (arg == "--waiters") o.waiters = whole(1, 1'000'000);
    else if (arg == "--locks") o.locks = whole(1, 100'000);
    else if (arg == "--acquisitions") o.acquisitions = whole(1, 100'000'000);
    else if (arg == "--cut-every-ms") o.cut_every_ms = whole(1, 3'600'000);
    else if (arg == "--threads") o.threads = whole(1, 64);
    else if (arg == "--processes") o.processes = whole(1, 2);
    else if (arg == "--local-handoff") o.local_handoff = whole(0, 1'000'000);
    else if (arg == "--max-time-ms") o.max_time_ms = whole(0, 3'600'000);
    else if (arg == "--foreign") o.foreign = true;
    else if (arg == "--recipe") {
      o.recipe = value();
      if (o.recipe != "mutex" && o.recipe != "rw" && o.recipe != "semaphore" && o.recipe != "race")
        fail("--recipe must be mutex, rw, semaphore or race, not '" + o.recipe + "'");
    } else if (arg == "--waiter") {
      o.waiter = value();
      if (o.waiter != "coroutine" && o.waiter != "callback")
        fail("--waiter must be coroutine or callback, not '" + o.waiter + "'");
    } else if (arg == "--samples") o.samples_dir = value();
    else if (arg == "--json") o.json = true;
    else fail("unknown option '" + arg + "'");
  }
  auto given = [&](const char* option) {
    for (int i = 2; i < argc; ++i)
      if (!std::strcmp(argv[i], option)) return true;
    return false;
  };
  if (given("--max-time-ms") && o.local_handoff < 0) fail("--max-time-ms needs --local-handoff");
  if (o.foreign && command != "throughput") fail("--foreign is throughput's");
  if (given("--waiter") && command != "scale") fail("--waiter is scale's");
  if (command == "ops-vs-floor") {
    zkasio::bench::run_ops_vs_floor(o);
    return 0;
  }
  zkasio::bench::report r;
  if (command == "floor") r = zkasio::bench::run_floor(o);
  else if (command == "ops") r = zkasio::bench::run_ops(o);
  else if (command == "handoff") {
    if (o.recipe == "race") fail("handoff's --recipe must be mutex, rw or semaphore");
    r = zkasio::bench::run_handoff(o);
  }
  else if (command == "uncontended") r = zkasio::bench::run_uncontended(o);
  else if (command == "throughput") r = zkasio::bench::run_throughput(o);
  else if (command == "read-heavy") r = zkasio::bench::run_read_heavy(o);
  else if (command == "global-lock") r = zkasio::bench::run_global_lock(o);
  else if (command == "herd") {
    if (o.recipe != "mutex" && o.recipe != "race") fail("herd's --recipe must be mutex or race");
    if (o.waiters > 200) fail("herd's --waiters must be at most 200 (one session each)");
    r = zkasio::bench::run_herd(o);
  } else if (command == "soak") {
    r = zkasio::bench::run_soak(o);
  } else if (command == "scale") {
    if (o.locks > o.waiters) fail("--locks must not exceed --waiters");
    r = zkasio::bench::run_scale(o);
  } else fail("unknown subcommand '" + command + "'");
  if (!o.samples_dir.empty()) zkasio::bench::write_samples(r, o.samples_dir);
  zkasio::bench::print(r, o.json);
  return r.sound ? 0 : 1;
}
