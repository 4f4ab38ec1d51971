// What every acquire does around its I/O (engine_acquire.cpp): reentry by
// owner, cancellation, the removal of a failed attempt's nodes.
#pragma once

#include <zkasio/error_code.hpp>

#include "recipes/engine/engine.hpp"

namespace zkasio::detail {

// What an owner's acquire does with the holds it has on this lock object.
struct reentry {
  enum { none, again, lost, deadlock, downgrade } what = none;
  std::shared_ptr<hold> h{};
};

reentry reentry_of(const engine_state& m, const owner& who, node_kind kind);
// Starts the removal of the nodes of failed or cancelled attempts.
std::vector<background<error_code>> discard(const std::shared_ptr<engine_state>& m,
                                                 std::vector<attempt> attempts);
// `ec` once `removing` is done (operation_aborted if that wait is cancelled).
awaitable<error_code> removed_then(std::vector<background<error_code>> removing, error_code ec);
}  // namespace zkasio::detail
