// An acquire of a fair queue from the caller's start to its completion, as a
// state machine without I/O: resume(event, look) -> action. It composes the
// attempts (each one fair_acquire: a node, its queue, its grant) with what
// lies around them:
// - reentry by owner (decided by the holds, reentry_of): granted again, a
//   lock lost, a would-be deadlock, or a downgrade's attempt;
// - a lock object with local_handoff (its local run, engine.hpp): the
//   acquire leads the run when nobody does, else waits in its line until
//   handed the lock in memory or the lead (then it attempts once connected,
//   unless the session it waited in expired meanwhile); a lock handed that
//   may be lost by the time it is taken, or whose session has ended (a
//   process paused past its timeout wakes to the hand-over), is not granted:
//   it is the lead (run_lead::taken_from); a try is busy while someone leads;
// - an attempt that failed: lock_busy reported once its node is gone; after
//   an expiry with requeue_on_expiry, another attempt in the session that
//   follows (within the same deadline); else the failure;
// - the deadline or the caller's cancellation (stopped), in any state: what
//   runs stops, and whatever the local run hands over afterwards (the lock
//   or the lead, in the same strand tick as the deadline, say) goes on to
//   the next waiter (pass_on): nothing handed over is dropped.
// The runner (acquire_runner.cpp) carries the actions out; unit-tested by
// scripted events in tests/unit/test_acquire_flow.cpp.
#pragma once

#include <cstdint>
#include <system_error>
#include <variant>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

class acquire_flow {
 public:
  // What the acquire found of its owner's holds (reentry_of).
  enum class reentry : std::uint8_t { none, again, lost, deadlock, downgrade };
  struct request {
    bool try_once = false;
    bool local_run = false;  // the lock object hands the lock over in memory (local_handoff)
    bool requeue_on_expiry = false;
    reentry holds = reentry::none;
  };
  // The world as it stands when an event is fed in.
  struct look {
    std::uint64_t generation = 0;  // the session's now
    bool connected = true;
    bool expired = false;     // the session expired, and no new one is connected yet
    bool closed = false;      // the session ended for good
    bool run_active = false;  // someone leads the lock object's local run
  };

  // ------------------------------------------------------------------ events
  struct handed {                        // by the local run: the lock in memory, else the lead
    bool lock = false;
    std::uint64_t generation = 0;        // the lock's: of the session its node was made in
    bool sure = true;                    // the lock's hold may be granted on now (hold_sure: not lost)
  };
  struct connected { error_code ec; };
  struct attempt_ended {                 // granted (no ec), or failed
    error_code ec;
    std::uint64_t generation = 0;        // of the session it was made in
  };
  struct stopped { error_code ec; };  // the deadline, or the caller's cancellation
  using event = std::variant<handed, connected, attempt_ended, stopped>;

  // ----------------------------------------------------------------- actions
  struct attempt {};                           // a new attempt (a new node)
  struct wait_in_run {};                       // join the local run's line
  struct connect {};                           // wait for the connection
  struct keep_waiting {};
  struct granted_again {};                     // reentry: the owner's hold, granted once more
  struct take_handed {};                       // complete with the lock handed over
  struct granted {};                           // the attempt's grant (the lead, if any, goes to its hold)
  struct pass_on {};                           // what was handed over goes to the next waiter
  struct fail {
    error_code ec;
    bool after_removal = false;  // reported once the attempt's node is gone (lock_busy)
  };
  using action = std::variant<attempt, wait_in_run, connect, keep_waiting, granted_again, take_handed, granted,
                              pass_on, fail>;

  explicit acquire_flow(request r) : request_(r) {}

  action start(const look& now);
  // The next action, given what came in. An event that no action waits for
  // is a broken promise of the runner's: fail(internal_error).
  action resume(const event& e, const look& now);

  bool finished() const noexcept { return stage_ == stage::finished; }
  bool attempting() const noexcept { return stage_ == stage::attempting; }
  bool waiting_in_run() const noexcept { return stage_ == stage::waiting; }
  // Leads the local run (the idle run's lead taken at start, or the lead
  // handed over), until finished: the runner holds the lead exactly then.
  bool leads() const noexcept { return leads_; }
  bool downgrade() const noexcept { return request_.holds == reentry::downgrade; }

 private:
  enum class stage : std::uint8_t { idle, waiting, connecting, attempting, finished };

  action lead_taken(const look& now);
  action attempt_ended_with(const attempt_ended& e, const look& now);
  bool queues_again(error_code ec, std::uint64_t made_in, const look& now) const;
  action finish(action a);

  request request_;
  stage stage_ = stage::idle;
  bool leads_ = false;
  std::uint64_t joined_ = 0;  // the session's generation when it joined the run's line
};

}  // namespace zkasio::detail
