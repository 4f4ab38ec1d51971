// The runner of fair_acquire (fair_acquire.hpp): the code that carries its
// actions out on the session and feeds the replies back in, on the engine's
// strand. A waiting acquire is this object, parked where the wake-up finds
// it (the known nodes' table, or a watch's waiters), not a chain of
// coroutine frames.
//
// start_acquire is every lock recipe's acquire (lock_engine.hpp's
// async_acquire): the fair ones run here, around the state machine: reentry
// by owner, the local run of a mutex with local_handoff, the deadline and
// the caller's cancellation (which stop the machine where it stands), the
// removal of a failed attempt's node (in the background), and queueing again
// in the next session after an expiry. The race recipes run their own
// coroutine (engine_race.cpp), which start_acquire starts.
#pragma once

#include <memory>
#include <system_error>
#include <zkasio/detail/completion.hpp>
#include <zkasio/lock.hpp>

#include "recipes/engine/engine.hpp"

namespace zkasio::detail {

// Creates the node of `a` (a semaphore's lease: create_only) and lists the
// queue, as an acquire does, riding through a lost connection in its
// session and finding the node by its uuid after a lost reply; completes
// with no error once the node is known (`a` then says which). Cancelled, it
// stops; whatever it may have created, `a` says (submitted, reply) for its
// removal.
template <class Token>
auto async_create_node(const std::shared_ptr<engine_state>& m, attempt& a, Token&& token);

void start_create_node(const std::shared_ptr<engine_state>& m, attempt& a, completion_ptr<> done);

template <class Token>
auto async_create_node(const std::shared_ptr<engine_state>& m, attempt& a, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code)>(
      [](auto handler, std::shared_ptr<engine_state> m, attempt* a) {
        start_create_node(m, *a, make_completion<>(std::move(handler), m->strand, m->strand, write_cancellation));
      },
      token, m, &a);
}

}  // namespace zkasio::detail
