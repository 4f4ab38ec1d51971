// The semaphore's wait for room (Curator's InterProcessSemaphoreV2), as a
// state machine without I/O: resume(event, look) -> action, the decisions
// of an acquirer that holds the semaphore's mutex and whose lease nodes are
// made, until the leases' children leave room for all of them.
//
// What it decides (the rule itself is lease_rule::room_for, queue_rule.hpp):
// - list the leases; room, and the session sure (session_sure): granted;
//   room on replies too old to be sure of the session: the contact confirmed
//   (session::async_confirm_contact), list again;
//   no room: watch the children from the listing's cversion (a try: busy);
//   one of its own leases gone (an operator, its session): lock_lost.
// - a lost connection in the leases' own session (not for a try): wait
//   for it (and after a busy answer, a pause: connect{after}), list again;
//   a later session (the leases went with the old one): session_expired.
// - the semaphore's mutex may be lost (look::mutex_lost, or the event
//   mutex_lost while watching): then two acquirers may count each other's
//   leases and wait for ever, so the wait ends with lock_lost; a listing
//   already answered with room still grants (the count is right whoever
//   holds the mutex).
// The runner (engine_leases.cpp) carries the actions out; the deadline and
// the caller's cancellation stop it from outside. Unit-tested by scripted
// events in tests/unit/test_room_wait.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <variant>
#include <vector>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

class room_wait {
 public:
  // The acquirer's leases.
  struct leases {
    std::vector<std::string> names{};  // its lease nodes' names
    std::uint64_t generation = 0;      // of the session that made them
    std::size_t max = 1;               // the semaphore's size
    bool one_look = false;             // a try: busy at once, no riding through
  };
  // The world as it stands when an event is fed in.
  struct look {
    std::uint64_t generation = 0;  // the session's now
    bool sure = true;              // session_sure: recent replies may grant
    error_code never_sure{};  // why no grant can ever be sure, if so
    bool mutex_lost = false;       // the semaphore's mutex may be lost
  };

  // ------------------------------------------------------------------ events
  struct listed {
    error_code ec;
    std::vector<std::string> children{};
    std::int32_t cversion = 0;
  };
  struct confirmed { error_code ec; };  // the session's contact confirmed (async_confirm_contact)
  struct changed { error_code ec; };    // the children's watch fired (or failed)
  struct connected { error_code ec; };  // the wait for the connection (and a pause) ended
  struct mutex_lost {};                      // while watching: the semaphore's mutex may be lost
  using event = std::variant<listed, confirmed, changed, connected, mutex_lost>;

  // ----------------------------------------------------------------- actions
  struct list {};
  struct confirm {};  // wait for a contact after now (async_confirm_contact)
  struct watch { std::int32_t cversion = 0; };  // until the children change from `cversion`, or mutex_lost
  struct connect { error_code after; };   // as fair_acquire's connect
  struct granted {};
  struct fail { error_code ec; };
  using action = std::variant<list, confirm, watch, connect, granted, fail>;

  explicit room_wait(leases mine) : mine_(std::move(mine)) {}

  action start(const look& now);
  // The next action, given what came back of the last one. An event that
  // is not the one the last action waits for is a broken promise of the
  // runner's: fail(internal_error).
  action resume(const event& e, const look& now);
  bool finished() const noexcept { return stage_ == stage::finished; }

 private:
  enum class stage { listing, confirming, watching, connecting, finished };

  action list_again(const look& now);
  action on_listed(const listed& l, const look& now);
  action wait_for_connection(error_code after);
  bool rides_through(error_code ec, const look& now) const;
  action finish(action a);

  leases mine_;
  stage stage_ = stage::listing;
};

}  // namespace zkasio::detail
