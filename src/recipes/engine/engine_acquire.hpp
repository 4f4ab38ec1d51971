// What every acquire does around its I/O (engine_acquire.cpp): reentry by
// owner, cancellation, the removal of a failed attempt's nodes, queueing
// again after an expiry, and `settle`, which puts them around an acquire's work.
#pragma once

#include "recipes/engine/engine.hpp"

namespace zkasio::detail {

// What an owner's acquire does with the holds it has on this lock object.
struct reentry {
  enum { none, again, lost, deadlock, downgrade } what = none;
  std::shared_ptr<hold> h{};
};

reentry reentry_of(const engine_state& m, const owner& who, node_kind kind);
// Any cancellation is terminal from now on; true if one came before.
awaitable<bool> cancelled_already();
// Starts the removal of the nodes of failed or cancelled attempts.
std::vector<background<std::error_code>> discard(const std::shared_ptr<engine_state>& m,
                                                 std::vector<attempt> attempts);
// lock_busy once `removing` is done (operation_aborted if that wait is cancelled).
awaitable<std::error_code> busy_after(std::vector<background<std::error_code>> removing);
// Whether an acquire that failed with `ec` queues again in the next session.
bool queue_again(std::error_code ec, const engine_state& m, bool try_once, std::uint64_t generation);

// One acquire's I/O, `work`, run under `deadline` (see until), its failures and
// cancellation (thrown by a cancelled co_await) reported in its result; if it
// failed, `remove()` starts the removal of its nodes in the background, and
// after lock_busy the result waits for them (busy_after). Never throws.
// (`remove` is called only then; `work` and `remove` may share the caller's
// attempt.)
template <class Remove>
awaitable<std::tuple<std::error_code, lock>> settle(const session& s, awaitable<std::tuple<std::error_code, lock>> work,
                                                   std::optional<std::chrono::steady_clock::time_point> deadline,
                                                   Remove remove) {
  std::tuple<std::error_code, lock> result;
  auto& ec = std::get<0>(result);
  try {
    result = co_await within(s, std::move(work), deadline);
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  if (!ec) co_return result;
  auto removing = remove();
  if (ec != error::lock_busy) co_return result;
  try {
    ec = co_await busy_after(std::move(removing));
  } catch (const std::system_error&) {
    ec = asio::error::operation_aborted;
  }
  co_return result;
}

}  // namespace zkasio::detail
