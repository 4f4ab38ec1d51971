// A chaos worker: one process, one session, `coroutines` coroutines that
// loop until `stop_at`: acquire one of `locks` locks, each of the recipe the
// driver chose for it (`plans`), hold 0-5 ms or until the lost signal,
// release. The acquires are mixed: most with a deadline; some without one,
// on a second lock object of the lock made with requeue_on_expiry (a
// shared_mutex's writer among them may downgrade to the read lock); some
// tries (lock_busy is an outcome; an election has no try); some cancelled
// at a random moment (operation_aborted is an outcome). A shared_mutex's
// acquirers read or write, a semaphore's ask for 1 to N leases. Its first
// coroutine takes one more lock, the long-hold lock (index `locks`, a
// mutex), which the first coroutines of the workers hold 1-12 s each,
// longer than a session's timeout: so faults find holders mid-hold, and
// their lost signal must end the hold before the server expires their
// session. Every grant and acquire is a line of its log (verdict.hpp). Then
// it tries each lock object once more (a free lock must be granted: a
// `final` line), counts the nodes of its session left at and under the
// lock paths, closes its session and exits 0.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zkasio/session.hpp>

#include "chaos/verdict.hpp"

namespace zkasio::chaos {

// A lock's recipe, and a semaphore's N (1 for the other recipes).
struct lock_plan {
  recipe kind = recipe::mutex;
  int capacity = 1;
};
// "mutex,semaphore:3,..." and back (invalid_argument if it cannot).
std::string format(const std::vector<lock_plan>& plans);
std::vector<lock_plan> parse_plans(std::string_view text);

struct worker_options {
  int index = 0;
  std::string hosts;
  std::string root;  // the locks are ROOT/lock-0 ... ROOT/lock-LOCKS (the long-hold lock)
  int locks = 3;
  std::vector<lock_plan> plans;  // of locks 0 to LOCKS - 1: all workers must agree
  int coroutines = 25;
  ns stop_at = 0;
  std::string log;
  unsigned seed = 0;
  std::chrono::milliseconds session_timeout{6000};
  std::chrono::milliseconds safety_margin{1000};
  std::chrono::milliseconds longest_wait{5000};  // an acquire's deadline is 0.5 s to this away
};

std::string lock_path(const std::string& root, int lock);

// The ephemeral nodes at and under the paths of locks 0 to `locks` (of the
// session `owner` only, if given), once the background deletes of the last
// releases are done: counted again until none is left, for 20 s at most;
// -1 if it could not tell. Every recipe's nodes are ephemeral, at the path
// (race_mutex, a race election) or below it (a semaphore's, two levels down).
asio::awaitable<int> nodes_left(session& s, std::string root, int locks, std::optional<std::int64_t> owner);

// What the driver passes on a worker's command line, and back.
std::vector<std::string> worker_arguments(const worker_options& o);
worker_options parse_worker_arguments(const std::vector<std::string>& args);

// Runs the worker; its exit status.
int run_worker(const worker_options& o);

}  // namespace zkasio::chaos
