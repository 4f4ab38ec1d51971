// A semaphore's acquire of n leases (Curator's InterProcessSemaphoreV2), as a
// state machine without I/O: resume(event, look) -> action. An attempt takes
// the semaphore's mutex (so one acquirer at a time waits for room, and n
// leases are taken all at once: no two acquirers of several leases can each
// hold part of what the other waits for), creates its n lease nodes in one
// session, then waits for room (room_wait.hpp decides that wait).
//
// What it decides around the attempts:
// - a count outside 1..max: invalid_lease_count, nothing made;
// - a lease made in a later session than the mutex was taken in, or its
//   answer read once that session has ended (the mutex, and any lease made
//   before, went with it): session_expired;
// - the mutex lost while it waited for room (room_wait ends with lock_lost):
//   its leases are deleted and, as it held no lease, nothing is lost to the
//   caller: in the same session it queues again for the mutex, within its
//   deadline; after an expiry it is a waiter of an expired session;
// - after an expiry, with requeue_on_expiry: another attempt in the session
//   that follows (decisions.hpp's queues_again);
// - lock_busy (a try) reported once its leases are gone.
// An attempt's leases are always deleted (in the background) by the runner
// when the machine leaves the attempt (fail, or take_mutex again), whatever
// the event was: an answer without an error can end it too. The runner (engine_leases.cpp)
// carries the actions out, the deadline over each of them; unit-tested by
// scripted events in tests/unit/test_lease_acquire.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>
#include <variant>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

class lease_acquire {
 public:
  struct request {
    std::size_t count = 1;
    std::size_t max = 1;
    bool try_once = false;
    bool requeue_on_expiry = false;
  };
  // The world as it stands when an event is fed in.
  struct look {
    std::uint64_t generation = 0;  // the session's now
    bool expired = false;          // the session says expired (see decisions.hpp's queues_again)
    bool closed = false;           // the session ended for good
  };

  // ------------------------------------------------------------------ events
  struct mutex_taken { error_code ec; };  // the semaphore's mutex acquired, or why not
  struct lease_made {
    error_code ec;
    std::uint64_t generation = 0;  // of the session it was made in
  };
  struct room_ended {             // room_wait's end: granted (no ec), or why not
    error_code ec;
    bool mutex_lost = false;      // the mutex may have been lost while it waited
  };
  using event = std::variant<mutex_taken, lease_made, room_ended>;

  // ----------------------------------------------------------------- actions
  struct take_mutex {};                         // a new attempt: the mutex first (with the deadline)
  struct make_lease { std::size_t index = 0; };  // create lease `index` of this attempt
  struct wait_for_room {};                      // room_wait, with the attempt's leases
  struct granted {};                            // every lease held; the mutex goes
  struct fail {
    error_code ec;
    bool after_removal = false;  // reported once the leases are gone (lock_busy)
  };
  using action = std::variant<take_mutex, make_lease, wait_for_room, granted, fail>;

  explicit lease_acquire(request r) : request_(r) {}

  action start(const look& now);
  // The next action, given what came back of the last one. An event that
  // is not the one the last action waits for is a broken promise of the
  // runner's: fail(internal_error).
  action resume(const event& e, const look& now);

  // Stopped by its runner (the deadline, the caller's cancellation).
  void abort() noexcept { stage_ = stage::finished; }
  bool finished() const noexcept { return stage_ == stage::finished; }
  // The attempt's session: where its mutex was taken and its leases made.
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  enum class stage { idle, mutex, leases, room, finished };

  action attempt(const look& now);
  action attempt_failed(error_code ec, bool mutex_lost, const look& now);
  action finish(action a);

  request request_;
  stage stage_ = stage::idle;
  std::size_t made_ = 0;         // leases of this attempt made
  std::uint64_t generation_ = 0;  // the session's at the attempt's start, then the mutex's
};

}  // namespace zkasio::detail
