// The runner of fair_acquire (fair_acquire.hpp): the code that carries its
// actions out on the session and feeds the replies back in, on the engine's
// strand. A waiting acquire is this object, parked where the wake-up finds
// it (the known nodes' table, or a watch's waiters), not a chain of
// coroutine frames.
//
// start_acquire is every lock recipe's acquire (lock_engine.hpp's
// async_acquire), run here around its attempts' state machines (the fair
// queues' fair_acquire; the race recipes' race_acquire, whose runner is
// race_run.hpp): reentry by owner, the local run of a mutex with
// local_handoff, the deadline and the caller's cancellation (which stop the
// machine where it stands), the removal of a failed attempt's node (in the
// background), and queueing again in the next session after an expiry.
// What its runners share with the semaphore's is machine_run.hpp.
#pragma once

#include <memory>
#include <zkasio/detail/completion.hpp>

#include "recipes/engine/engine.hpp"

namespace zkasio::detail {

// Creates the node of `a` (a semaphore's lease: create_only) and lists the
// queue, as an acquire does, riding through a lost connection in its
// session and finding the node by its uuid after a lost reply; completes
// `done` with no error once the node is known (`a` then says which).
// Cancelled (on the strand: at once), it stops, and writes nothing more into
// `a`; whatever it may have created, `a` says (submitted, reply) for its
// removal.
void start_create_node(const std::shared_ptr<engine_state>& m, attempt& a, completion_ptr<> done);

}  // namespace zkasio::detail
