// A granted node (engine_hold.cpp): its monitor (what fires the lost
// signal), its grants, its release, and a mutex's in-process handoff.
#pragma once

#include <zkasio/error_code.hpp>

#include "recipes/engine/engine.hpp"

namespace zkasio::detail {

// The release of the last grant of `h`, which leads a run: hands the lock to
// the next waiter if the rule says so (true).
bool hand_off(const std::shared_ptr<hold>& h);
// The run's lead goes to its next waiter, or the run ends.
void pass_lead(const std::shared_ptr<engine_state>& m);

// Whether a grant may be made now: not past the moment the session could
// have expired by its replies (minus the safety margin).
bool session_sure(const engine_state& m);
// Whether a grant may be made on the held node `h` now (a reentry, a local
// handoff): not known lost, its session the same and sure (session_sure),
// and under on_suspend connected. (A delete by someone else not yet
// notified is not known here: the holder's lost signal fires when it is.)
bool hold_sure(const hold& h);
// invalid_safety_margin when no grant can ever be sure.
error_code never_sure(const engine_state& m);
// Gives one grant's share of `h` back without deleting its node; the last
// ends the hold. (A node of the user's own recipe: async_leave.)
void leave(const std::shared_ptr<hold>& h, completion_ptr<> done);
// A new lock object sharing `h`.
lock grant_of(const std::shared_ptr<hold>& h);
// Gives one grant's share of `h` back; the last deletes the node. `done`
// (if any) completes once that is done.
void give_back(const std::shared_ptr<hold>& h, completion_ptr<> done);
// The attempt's node, held from now on: monitored, released by its grants.
// The attempt is the hold's now (its node's name and its turn move into it).
lock granted(const std::shared_ptr<engine_state>& m, attempt&& a, std::optional<owner> who);

}  // namespace zkasio::detail
