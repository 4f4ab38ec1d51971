// A chaos worker: one process, one session, `coroutines` coroutines that
// loop until `stop_at`: acquire one of `locks` mutexes (with a deadline),
// hold 0-5 ms or until the lost signal, release. Its first coroutine takes
// one more lock, the long-hold lock (index `locks`), which the first
// coroutines of the workers hold 1-12 s each, longer than a session's
// timeout: so faults find holders mid-hold, and their lost signal must end
// the hold before the server expires their session. every grant and acquire is
// a line of its log (verdict.hpp). Then it tries each lock once more (a
// free lock must be granted: a `final` line), counts the nodes of its session
// left under the lock paths, closes its session and exits 0.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "chaos/verdict.hpp"

namespace zkasio::chaos {

struct worker_options {
  int index = 0;
  std::string hosts;
  std::string root;  // the locks are ROOT/lock-0 ... ROOT/lock-LOCKS (the long-hold lock)
  int locks = 3;
  int coroutines = 25;
  ns stop_at = 0;
  std::string log;
  unsigned seed = 0;
  std::chrono::milliseconds session_timeout{6000};
  std::chrono::milliseconds safety_margin{1000};
  std::chrono::milliseconds longest_wait{5000};  // an acquire's deadline is 0.5 s to this away
};

std::string lock_path(const std::string& root, int lock);

// What the driver passes on a worker's command line, and back.
std::vector<std::string> worker_arguments(const worker_options& o);
worker_options parse_worker_arguments(const std::vector<std::string>& args);

// Runs the worker; its exit status.
int run_worker(const worker_options& o);

}  // namespace zkasio::chaos
