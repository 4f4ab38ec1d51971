// zkasio::semaphore: N leases shared by every client of one path, with the
// layout of Apache Curator's InterProcessSemaphoreV2, so that Curator and
// zkasio clients share one semaphore:
// - "<path>/locks": a mutex (Curator's InterProcessMutex nodes) that one
//   acquirer at a time holds while it waits for room;
// - "<path>/leases": one EPHEMERAL_SEQUENTIAL node "_c_<uuid>-lease-<seq>"
//   per lease, held while the lease is. An acquirer creates its nodes, then
//   waits (a watch on the children) until the children are at most N, its own
//   included; every child takes a slot, as Curator counts them.
//
// Waiters are served in the order of the mutex (FIFO). async_acquire_many(n)
// takes n leases at once, all or nothing, holding the mutex while it waits:
// two zkasio clients asking for several can never each hold part of what the
// other waits for. (Curator takes them one by one, each under the mutex: a
// Curator client asking for several beside such an acquirer can deadlock
// with it, as two Curator clients can.) If the mutex may be lost while its
// holder waits for room (its session, or an operator deleting its node),
// that acquire never waits beside another: its lease nodes are deleted and
// it queues again for the mutex, within its deadline (it held no lease, so
// nothing is lost). After an expiry it is a waiter whose session expired
// (session_expired, or queued again with requeue_on_expiry); a try fails
// with lock_lost. The maximum is each client's own, as in Curator: give
// every client the same.
//
// A lease is a zkasio::lock (lock.hpp): its lost signal fires when its node
// or session may be gone, async_release deletes its node (guaranteed), its
// destructor releases. Cancellation and timeouts at every stage leave no node.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>

namespace zkasio {

class semaphore : public detail::lock_object {
 public:
  // Throws std::invalid_argument if max_leases is 0; invalid_path
  // (system_error) for a path that cannot be one.
  semaphore(session& s, std::string_view path, std::size_t max_leases, lock_options options = {})
      : lock_object(s, leases_of(path, max_leases), options, detail::queue_family::semaphore),
        // One strand for both: the mutex's lost signal is bound by the
        // acquire that waits for room (lease_op in engine_leases.cpp).
        // (Its observer hears the semaphore's acquires and leases, not
        // the mutex's.)
        locks_(detail::make_engine(s, (path == "/" ? "" : std::string(path)) + "/locks",
                                   detail::without_observer(std::move(options)), detail::queue_family::mutex,
                                   get_executor())),
        path_(path),
        max_(max_leases) {}

  const std::string& path() const noexcept { return path_; }
  std::size_t max_leases() const noexcept { return max_; }

  // One lease. void(error_code, lock)
  template <class Token = default_token>
  auto async_acquire(Token&& token = {}) {
    return one(detail::lease_request{.count = 1, .max = max_}, std::forward<Token>(token));
  }
  // lock_busy unless a lease is free at once (and the semaphore's mutex is),
  // leaving no node behind.
  template <class Token = default_token>
  auto async_try_acquire(Token&& token = {}) {
    return one(detail::lease_request{.count = 1, .max = max_, .try_once = true}, std::forward<Token>(token));
  }
  // lock_timeout at `deadline`, leaving no node behind.
  template <class Token = default_token>
  auto async_acquire_until(std::chrono::steady_clock::time_point deadline, Token&& token = {}) {
    return one(detail::lease_request{.count = 1, .max = max_, .deadline = deadline}, std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_acquire_for(std::chrono::steady_clock::duration timeout, Token&& token = {}) {
    return one(detail::lease_request{.count = 1, .max = max_, .timeout = timeout}, std::forward<Token>(token));
  }

  // `count` leases at once, all or nothing (invalid_lease_count unless
  // 1 <= count <= max_leases()). void(error_code, vector<lock>)
  template <class Token = default_token>
  auto async_acquire_many(std::size_t count, Token&& token = {}) {
    return detail::async_acquire_leases<std::vector<lock>>(state_, locks_, {.count = count, .max = max_},
                                                           std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_acquire_many_until(std::size_t count, std::chrono::steady_clock::time_point deadline,
                                Token&& token = {}) {
    return detail::async_acquire_leases<std::vector<lock>>(
        state_, locks_, {.count = count, .max = max_, .deadline = deadline}, std::forward<Token>(token));
  }

  // async_contenders: the lease nodes (held, or one acquirer's waiting).

 private:
  static std::string leases_of(std::string_view path, std::size_t max_leases) {
    if (max_leases == 0) throw std::invalid_argument("zkasio::semaphore " + std::string(path) + ": max_leases must be at least 1");
    if (auto problem = path_problem(path); !problem.empty())
      throw system_error(make_error_code(error::invalid_path), problem);
    return (path == "/" ? "" : std::string(path)) + "/leases";
  }
  template <class Token>
  auto one(detail::lease_request request, Token&& token) {
    return detail::async_acquire_leases<lock>(state_, locks_, request, std::forward<Token>(token));
  }

  std::shared_ptr<detail::engine_state> locks_;  // the semaphore's mutex, "<path>/locks"
  std::string path_;
  std::size_t max_;
};

}  // namespace zkasio
