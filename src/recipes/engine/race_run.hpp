// race_run: the runner (a machine_run, machine_run.hpp) of race_acquire
// (race_acquire.hpp), the race recipes' attempts (race_mutex, election's
// race mode: one EPHEMERAL node at the path, created by whoever is first).
// It carries each action out on the session and feeds the answer back in,
// on the engine's strand; around its attempts runs acquire_op
// (acquire_runner.cpp), as around a fair queue's: reentry, the deadline, the
// caller's cancellation, queueing again after an expiry. A failed or stopped
// attempt's node, if its create took effect, is deleted in the background
// while the attempt still has its session's turn (local_turns.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zkasio/error_code.hpp>

#include "recipes/engine/engine.hpp"
#include "recipes/engine/machine_run.hpp"
#include "recipes/machines/race_acquire.hpp"

namespace zkasio::detail {

class race_run : public machine_run<race_run> {
 public:
  explicit race_run(std::shared_ptr<engine_state> m) : machine_run(std::move(m)) {}

 protected:
  friend class machine_run<race_run>;

  // A new attempt (a race has no downgrade).
  void start_attempt(const acquire_request& request, std::optional<std::string> downgrade_of);
  bool running() const { return fsm_ && !fsm_->finished(); }
  std::uint64_t attempt_generation() const { return a_.generation; }
  // Ends the attempt where it stands: its pending request cancelled, later
  // answers dropped.
  void stop();
  // The attempt, for its hold: its turn goes with it.
  attempt take_attempt() { return std::move(a_); }
  // A failed or stopped attempt's node goes, in the background, if its
  // create took effect; its turn, once that is done.
  std::vector<background<error_code>> discard_attempt();
  // The attempt ended: granted (no error; take_attempt says its node), or failed.
  virtual void ended(error_code ec) = 0;
  // What its node holds.
  virtual const std::string& node_data() const = 0;

 private:
  void resume(const race_acquire::event& e);
  void act(race_acquire::action next);
  race_acquire::look look() const;
  void take_turn(bool wait);

  std::optional<race_acquire> fsm_;
  attempt a_;  // the turn, the session, whether a create was sent: for its hold or its cleanup
};

}  // namespace zkasio::detail
