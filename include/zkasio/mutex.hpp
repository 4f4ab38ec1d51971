// zkasio::mutex: the fair distributed lock of ZooKeeper's recipe, with nodes
// named as Apache Curator's InterProcessMutex names them, so that Curator and
// zkasio contenders on one path exclude each other.
//
// Each acquire creates one EPHEMERAL_SEQUENTIAL node "_c_<uuid>-lock-<seq>"
// under the lock path (parents are created as containers) and lists the
// children in the same round trip; the lowest sequence holds the lock; every
// other contender waits for the deletion of its immediate predecessor only, so
// a release wakes exactly one waiter.
//
// Cancellation: async_acquire honours terminal and partial cancellation at
// every stage (before the create's reply, while waiting, at the grant): it
// completes with operation_aborted and the node is deleted in the background
// (found by its uuid if the create's reply was not in yet). A lock granted as
// the cancellation arrived is delivered and released by its destructor.
//
// Reentrancy is by owner, not by thread (a coroutine hops threads): an
// acquire passing an `owner` (acquire_options::who) that already holds this
// mutex object completes at once without a new node; the node goes when as
// many releases as grants have happened. Without an owner every acquire is
// its own owner.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>

namespace zkasio {

// Its operations (defined in its bases, detail::exclusive_acquire and
// detail::lock_object, lock_engine.hpp; each takes any completion token,
// zkasio::default_token without one, and completes on the handler's
// executor, else the mutex's strand):
//   async_acquire([options])         void(error_code, lock): waits for the lock
//                                    (options: lock.hpp's acquire_options, an
//                                    owner, a deadline or timeout, in one)
//   async_try_acquire()              void(error_code, lock): lock_busy unless free
//                                    at once; not_connected while no server is
//   async_acquire_until(deadline)    void(error_code, lock): lock_timeout at the
//   async_acquire_for(timeout)       deadline if connected then, not_connected if
//                                    not (the timeout counts from the launch)
//   async_contenders()               void(error_code, vector<contender>): the queue
//   async_revoke(node)               void(error_code): Curator's revocation of the
//                                    contender at `node` (a full path)
// Errors besides: session_expired (a waiter's session ended, unless
// lock_options::requeue_on_expiry), invalid_safety_margin, no_auth (the
// lock path's ACL), session_closed. Cancellation: terminal and partial, at
// every stage (above); the observers honour total too.
class mutex : public detail::lock_object, public detail::exclusive_acquire<mutex> {
 public:
  // The session must outlive the mutex and every lock of it, and must not be
  // assigned another session meanwhile.
  mutex(session& s, std::string_view path, mutex_options options = {})
      : lock_object(s, path, std::move(options), detail::queue_family::mutex) {}

 private:
  friend class detail::exclusive_acquire<mutex>;
};

// Acquires `m`, runs the critical section `body()` (returning an
// asio::awaitable) under the lock: see with_hold (lock.hpp).
template <class Body>
auto with_lock(mutex& m, Body body) -> detail::body_awaitable_t<Body> {
  return with_hold(m.async_acquire(asio::use_awaitable_t<detail::body_executor_t<Body>>{}), std::move(body));
}

}  // namespace zkasio
