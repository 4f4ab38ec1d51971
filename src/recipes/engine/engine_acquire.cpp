// What every acquire does around its I/O: reentry by owner, cancellation,
// the removal of its nodes when it fails, and queueing again after an expiry.
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

// Every operation that creates nodes sees any cancellation as terminal from
// the time it runs (it has no effect left after one: its nodes go), partial
// cancellation included; true if one came before it ran.
awaitable<bool> cancelled_already() {
  // A cancellation that came before this coroutine ran is in the state that
  // the reset replaces. (The deadline's `||` passes only terminal
  // cancellation on: a partial one would be dropped there, and with it every
  // later one.)
  auto early = (co_await asio::this_coro::cancellation_state).cancelled();
  co_await asio::this_coro::reset_cancellation_state(
      asio::enable_partial_cancellation(), [](asio::cancellation_type type) {
        return type != asio::cancellation_type::none ? asio::cancellation_type::terminal : type;
      });
  co_return early != asio::cancellation_type::none;
}

// After a failed or cancelled acquire of `attempts`: nothing may be left
// behind. Each node goes, wherever the failure or cancellation struck, in the
// background (cancellation is prompt). Not a coroutine: its removals start
// even in a coroutine whose next co_await would throw, cancelled.
std::vector<background<std::error_code>> discard(const std::shared_ptr<engine_state>& m,
                                                 std::vector<attempt> attempts) {
  std::vector<background<std::error_code>> removing;
  for (auto& a : attempts) {
    if (a.reply && !a.reply->done) a.reply->abandoned = true;
    if (a.submitted) removing.emplace_back(m->strand, remove_attempt_node(m, std::move(a)));
  }
  return removing;
}

// After lock_busy (a try), the nodes are gone by the time it reports: waits
// for `removing`; operation_aborted if that wait was cancelled (they go on).
// (Cancelled, a co_await throws: the caller catches.)
awaitable<std::error_code> busy_after(std::vector<background<std::error_code>> removing) {
  for (auto& r : removing)
    if (!co_await r.wait()) co_return std::error_code(asio::error::operation_aborted);
  co_return make_error_code(error::lock_busy);
}

// With lock_options::requeue_on_expiry, an acquire whose session expired
// while it waited (its node went with the session; it held nothing) queues
// again, as a new attempt, in the session that follows, within the same
// deadline. Not a try, and not without a session to follow: closed, or
// expired for good (reconnect_on_expiry off). `generation`: the attempt's
// session. (A session that will reconnect counts the new generation before
// it says expired, session_impl::on_unrecoverable: so a new generation tells
// from any thread that a session follows, where the state alone may still
// say expired.)
bool queue_again(std::error_code ec, const engine_state& m, bool try_once, std::uint64_t generation) {
  auto state = m.s.state();
  return queues_again(ec, m.options.requeue_on_expiry, try_once, generation, m.s.generation(),
                      state == session_state::expired, state == session_state::closed);
}

}  // namespace zkasio::detail
