// A waiting room: locks held shut (the gates) while waiters queue on them
// over several sessions, then opened and drained, each waiter recorded with
// what it was granted. What scale (one queue of many waiters) and soak
// (the same, round after round, with connections cut) share.
#pragma once

#include <asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <zkasio/mutex.hpp>

#include "harness.hpp"

namespace zkasio::bench {

// /proc/self/status's `field` ("VmRSS:", "Threads:"), as a number.
long process_status(const char* field);
long resident_bytes();
// What malloc has handed out and not had back (RSS also counts what it keeps).
long heap_in_use_bytes();

// The lock nodes under `path` (holders and waiters).
asio::awaitable<std::size_t> lock_node_count(session& s, const std::string& path);

// How each waiter is written: a coroutine (co_spawn, co_await the acquire
// and the release), as most users write one, or plain completion handlers.
enum class waiter_kind { coroutine, callback };

struct drain_result {
  std::size_t granted_once = 0;  // waiters granted exactly once
  bool in_order = true;          // each lock granted in its queue's order
  double drain_s = 0;            // from the gates' release to the last grant
};

class waiting_room {
 public:
  // `locks` locks under `dir`, with a mutex object per session on each.
  waiting_room(session_list& sessions, const std::string& dir, std::size_t locks);

  const std::vector<std::string>& paths() const { return paths_; }

  // Takes every lock through the first session (the gates).
  asio::awaitable<void> hold_gates();
  // With the gates held: `waiters` waiters over the locks and sessions, each
  // acquiring once and releasing at once; `queued()` runs once all wait;
  // then the gates open and every waiter is granted. Another round starts
  // with hold_gates() again.
  asio::awaitable<drain_result> queue_and_drain(std::size_t waiters, std::function<void()> queued,
                                                waiter_kind kind = waiter_kind::coroutine);

 private:
  session_list& sessions_;
  std::vector<std::string> paths_;
  std::vector<std::vector<mutex>> mutexes_;  // [session][lock]
  std::vector<lock> gates_;
};

}  // namespace zkasio::bench
