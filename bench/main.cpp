// zkasio-bench: latency of ZooKeeper operations and of the lock, against a
// running server (bench/run starts one and compares systems).
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "latency.hpp"

namespace {

const char* usage =
    "usage: zkasio-bench SUBCOMMAND [--hosts H] [--rounds N] [--json]\n"
    "subcommands:\n"
    "  floor   the raw C client with poll(): create, get_children, exists, delete,\n"
    "          notify (a delete in one session seen by a watch in another),\n"
    "          pipelined_create_get_children\n"
    "  ops     the same operations through zkasio::session\n"
    "  ops-vs-floor [--batches B]\n"
    "          floor and ops in B alternating batches of rounds/B, and the ratio of p50s\n"
    "--hosts defaults to $ZKASIO_HOSTS, then 127.0.0.1:2181; latencies are in microseconds;\n"
    "--json prints one JSON object and nothing else on stdout.\n";

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
    if (arg == "--hosts") o.hosts = value();
    else if (arg == "--rounds") {
      auto text = value();
      char* end = nullptr;
      long n = std::strtol(text.c_str(), &end, 10);
      if (*end || n < 1 || n > 10'000'000) fail("--rounds must be a positive number, not '" + text + "'");
      o.rounds = static_cast<int>(n);
    } else if (arg == "--batches") {
      auto text = value();
      char* end = nullptr;
      long n = std::strtol(text.c_str(), &end, 10);
      if (*end || n < 1 || n > 1000) fail("--batches must be a number from 1 to 1000, not '" + text + "'");
      o.batches = static_cast<int>(n);
    } else if (arg == "--json") o.json = true;
    else fail("unknown option '" + arg + "'");
  }
  if (command == "ops-vs-floor") {
    zkasio::bench::run_ops_vs_floor(o);
    return 0;
  }
  zkasio::bench::report r;
  if (command == "floor") r = zkasio::bench::run_floor(o);
  else if (command == "ops") r = zkasio::bench::run_ops(o);
  else fail("unknown subcommand '" + command + "'");
  zkasio::bench::print(r, o.json);
}
