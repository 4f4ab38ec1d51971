// zkasio::race_mutex: the non-fair lock. Whoever creates the one
// EPHEMERAL node at the lock path first holds the lock; every other
// contender watches that node and, when it is deleted, all of them race to
// create it again.
//
// Simpler than zkasio::mutex and without its order: there is no queue, so a
// contender that just arrived may win against one that waited for minutes,
// and every release wakes every waiting session (the herd effect: N waiting
// sessions cost N notifications and N creates per release, of which one
// wins; see the README's herd table). Acceptable with few contenders and no
// need for fairness; otherwise use zkasio::mutex, which wakes exactly one.
//
// Within one session, contenders take turns in the process (one of them at
// the server at a time, in arrival order): a node's ephemeral owner is a
// session, so that is how a contender whose create reply was lost knows the
// node it finds is its own.
//
// The holder is a zkasio::lock (lock.hpp): lost signal, fencing token (the
// node's czxid), guaranteed release, reentrancy by owner. A release deletes
// the node only while it is still the holder's own (its czxid). Cancellation
// and timeouts at every stage leave no node. The path's parents are created
// as containers; a persistent node at the path itself is refused
// (node_exists), not waited for.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>

namespace zkasio {

// Its operations: the mutex's acquires (mutex.hpp lists them, with their
// completion signatures; defined in detail::exclusive_acquire,
// lock_engine.hpp), but async_try_acquire is lock_busy if somebody holds it
// or another contender of this session is racing for it; and async_holder,
// below, for who holds it. It has no queue, so no async_contenders or
// async_revoke.
class race_mutex : public detail::engine_handle, public detail::exclusive_acquire<race_mutex> {
 public:
  // The session must outlive the race_mutex and every lock of it. Throws
  // invalid_path (system_error) for a path that cannot be one.
  race_mutex(session& s, std::string_view path, lock_options options = {})
      : engine_handle(s, path, std::move(options), detail::queue_family::race) {}

  // Who holds it now (nullopt: nobody). void(error_code, optional<leader>)
  template <class Token = default_token>
  auto async_holder(Token&& token = {}) {
    return detail::async_current_leader(state_, std::forward<Token>(token));
  }

 private:
  friend class detail::exclusive_acquire<race_mutex>;
};

// Acquires `m`, runs `body()` under the lock: see with_hold (lock.hpp).
template <class Body>
auto with_lock(race_mutex& m, Body body) -> detail::body_awaitable_t<Body> {
  return with_hold(m.async_acquire(asio::use_awaitable_t<detail::body_executor_t<Body>>{}), std::move(body));
}

}  // namespace zkasio
