// What a contender's node is, and which recipe's queue it stands in: what a
// lock object tells the engine (lock_engine.hpp). The names' grammar is the
// engine's (src/recipes/rules/lock_queue.hpp).
#pragma once

#include <cstdint>

namespace zkasio::detail {

// What a contender's node is, by the lock name Curator's recipes put between
// "_c_<uuid>-" and the sequence.
enum class node_kind : std::uint8_t {
  lock,   // "lock-": InterProcessMutex (zkasio::mutex)
  read,   // "__READ__": InterProcessReadWriteLock's readers (zkasio::shared_mutex)
  write,  // "__WRIT__": its writers
  lease,  // "lease-": InterProcessSemaphoreV2's leases (zkasio::semaphore)
  latch,  // "latch-": LeaderLatch's candidates (zkasio::election, fair mode)
};

// The recipes of the fair engine, each with its rule over the nodes of its
// queue (src/recipes/rules/queue_rule.hpp).
enum class queue_family : std::uint8_t {
  mutex,       // lock
  read_write,  // read and write, in one sequence space
  semaphore,   // lease (a semaphore's leases, which no rule orders)
  election,    // latch
  race,        // none: the race recipes' one node is the path itself (race_engine)
};

}  // namespace zkasio::detail
