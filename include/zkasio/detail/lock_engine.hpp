// The contender engine: the one machine under every lock recipe.
//
// A contender creates one EPHEMERAL_SEQUENTIAL node, Curator-named
// ("_c_<uuid>-<lock name><sequence>", see lock_queue.hpp), under the lock
// path and lists the children in the same round trip; it waits for the
// nearest node ahead of it that blocks it (decide: the recipe's rule is the
// node kinds of its queue and `blocks`), in this process when that node is
// one of its own session's (known_nodes), else with a watch; it is granted
// when nothing ahead blocks it and its node is still there. A lost create
// reply is answered by finding the node by its uuid; whatever ends an
// attempt, its node is deleted in the background, never another session's.
// A holder's node and session are monitored until it is released (the lost
// signal), and the release's delete is retried while the session lives.
//
// One engine_state per lock object (mutex, shared_mutex): its strand runs
// all of it; the process-wide knowledge of nodes it shares with every other
// lock object on the same path is known_nodes.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>
#include <zkasio/detail/lock_queue.hpp>
#include <zkasio/lock.hpp>

namespace zkasio::detail {

// Throws invalid_path (system_error) for a path that cannot be a lock path.
// `strand`: another engine's, to run on one strand with it (a semaphore's
// two); else a new one.
std::shared_ptr<engine_state> make_engine(session& s, std::string_view path, lock_options options,
                                          queue_family family, std::optional<lock_strand> strand = std::nullopt);
lock_strand strand_of(const engine_state& engine);
const std::string& path_of(const engine_state& engine);

// One acquire. Reentrancy by owner (the holds of `who` on this lock object):
// a hold of the same kind is granted again (lock_lost if lost); a write hold
// asking for a read lock takes one at once, at the write node's place in the
// queue (Curator's downgrade); a read hold asking for the write lock fails
// with would_deadlock.
struct acquire_request {
  node_kind kind = node_kind::lock;
  std::optional<owner> who = std::nullopt;
  bool try_once = false;  // lock_busy instead of waiting
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt;
};
asio::awaitable<std::tuple<std::error_code, lock>> acquire(std::shared_ptr<engine_state> engine,
                                                         acquire_request request);
// n leases of a semaphore at once (Curator's InterProcessSemaphoreV2): its
// mutex `locks` taken (so one acquirer at a time waits for room), a lease
// node created under `leases` for each, granted once the leases' children are
// at most `max`. invalid_lease_count unless 1 <= count <= max.
struct lease_request {
  std::size_t count = 1;
  std::size_t max = 1;
  bool try_once = false;
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt;
};
asio::awaitable<std::tuple<std::error_code, std::vector<lock>>> acquire_leases(std::shared_ptr<engine_state> leases,
                                                                             std::shared_ptr<engine_state> locks,
                                                                             lease_request request);
// One lease: acquire_leases' first.
asio::awaitable<std::tuple<std::error_code, lock>> acquire_lease(std::shared_ptr<engine_state> leases,
                                                               std::shared_ptr<engine_state> locks,
                                                               lease_request request);

// The queue, in order: the holder(s) first.
asio::awaitable<std::tuple<std::error_code, std::vector<contender>>> contenders(
    std::shared_ptr<engine_state> engine);
// Curator's revocation: "__REVOKE__" written into the contender's node.
asio::awaitable<std::tuple<std::error_code>> revoke(std::shared_ptr<engine_state> engine, std::string node);

// The same as asynchronous operations on the engine's strand (spawn_on).
template <class Token>
auto async_acquire(const std::shared_ptr<engine_state>& engine, acquire_request request, Token&& token) {
  return spawn_on<std::tuple<std::error_code, lock>>(strand_of(*engine), acquire(engine, std::move(request)),
                                                     std::forward<Token>(token));
}
template <class Token>
auto async_acquire_leases(const std::shared_ptr<engine_state>& leases, const std::shared_ptr<engine_state>& locks,
                          lease_request request, Token&& token) {
  return spawn_on<std::tuple<std::error_code, std::vector<lock>>>(
      strand_of(*leases), acquire_leases(leases, locks, std::move(request)), std::forward<Token>(token));
}
template <class Token>
auto async_contenders(const std::shared_ptr<engine_state>& engine, Token&& token) {
  return spawn_on<std::tuple<std::error_code, std::vector<contender>>>(strand_of(*engine), contenders(engine),
                                                                       std::forward<Token>(token));
}
template <class Token>
auto async_revoke(const std::shared_ptr<engine_state>& engine, std::string_view node, Token&& token) {
  return spawn_on<std::tuple<std::error_code>>(strand_of(*engine), revoke(engine, std::string(node)),
                                               std::forward<Token>(token));
}

// What every lock object (mutex, shared_mutex) is: an engine on a path, with
// the operations that do not depend on the recipe's rule.
class lock_object {
 public:
  using executor_type = asio::any_io_executor;  // a strand

  executor_type get_executor() const { return strand_of(*state_); }
  const std::string& path() const { return path_of(*state_); }

  // The queue, in order: who holds (first) and who waits (contender::shared
  // tells a shared_mutex's readers). void(error_code, vector<contender>)
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_contenders(Token&& token = {}) {
    return detail::async_contenders(state_, std::forward<Token>(token));
  }

  // Asks the holder of `node` (a contender's node name) to release, with
  // Curator's protocol ("__REVOKE__" written into the node): its lost signal
  // fires. not_held when there is no such contender. void(error_code)
  template <class Token = asio::default_completion_token_t<asio::any_io_executor>>
  auto async_revoke(std::string_view node, Token&& token = {}) {
    return detail::async_revoke(state_, node, std::forward<Token>(token));
  }

 protected:
  // The session must outlive the lock object and every lock of it, and must
  // not be assigned another session meanwhile.
  lock_object(session& s, std::string_view path, lock_options options, queue_family family)
      : state_(make_engine(s, path, std::move(options), family)) {}

  std::shared_ptr<engine_state> state_;
};

}  // namespace zkasio::detail
