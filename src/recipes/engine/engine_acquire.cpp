// What every acquire does around its I/O: reentry by owner, cancellation,
// the removal of its nodes when it fails.
#include "recipes/engine/engine_acquire.hpp"
#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"

namespace zkasio::detail {

reentry reentry_of(const engine_state& m, const owner& who, node_kind kind) {
  std::shared_ptr<hold> same, write;
  bool reads = false;
  for (auto& weak : m.holds)
    if (auto h = weak.lock(); h && h->who == who && !h->released) {
      if (h->kind == kind) same = h;
      if (h->kind == node_kind::write) write = h;
      reads = reads || h->kind == node_kind::read;
    }
  if (same) return {hold_sure(*same) ? reentry::again : reentry::lost, same};
  if (kind == node_kind::write && reads) return {reentry::deadlock};
  if (kind == node_kind::read && write) return {write->lost ? reentry::lost : reentry::downgrade, write};
  return {};
}

// After a failed or cancelled acquire of `attempts`: nothing may be left
// behind. Each node goes, wherever the failure or cancellation struck, in the
// background (cancellation is prompt). Not a coroutine: its removals start
// even in a coroutine whose next co_await would throw, cancelled.
std::vector<background<error_code>> discard(const std::shared_ptr<engine_state>& m,
                                                 std::vector<attempt> attempts) {
  std::vector<background<error_code>> removing;
  for (auto& a : attempts) {
    if (a.reply && !a.reply->done) a.reply->abandoned = true;
    if (a.submitted) removing.emplace_back(m->strand, remove_attempt_node(m, std::move(a)));
  }
  return removing;
}

// After lock_busy (a try), the nodes are gone by the time it reports: waits
// for `removing`, then `ec`; operation_aborted if that wait was cancelled
// (they go on).
awaitable<error_code> removed_then(std::vector<background<error_code>> removing, error_code ec) {
  for (auto& r : removing)
    if (!co_await r.wait()) co_return error_code(asio::error::operation_aborted);
  co_return ec;
}

}  // namespace zkasio::detail
