// zkasio::shared_mutex: the read/write lock, with nodes named as Apache
// Curator's InterProcessReadWriteLock names them ("_c_<uuid>-__READ__<seq>"
// and "_c_<uuid>-__WRIT__<seq>", one sequence space under one path), so that
// Curator and zkasio readers and writers on one path exclude each other as
// they should. (A shared_mutex and a mutex on the same path do not: their
// nodes are of different recipes.)
//
// A writer waits for the node just ahead of it, of either kind; a reader
// waits only for the nearest writer ahead of it (never for readers, nor for a
// writer that came after it). So readers share the lock, and a writer queued
// behind readers keeps later readers out: no writer starves.
//
// Everything else is the mutex's (mutex.hpp): the same lock object, lost
// signal and release; cancellation at every stage leaves no node; reentrancy
// by owner. An owner holding the write lock may take the read lock at once
// (a downgrade: its read node takes the write node's place in the queue, so
// it may then release the write lock and go on reading before any writer
// queued meanwhile); an owner holding only the read lock asking for the write
// lock fails at once with would_deadlock.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>

namespace zkasio {

// Its operations, in the vocabulary of every zkasio lock (mutex,
// race_mutex, semaphore: acquire, as std::counting_semaphore and Curator
// say; the read lock's with std::shared_mutex's `_shared`):
// - the write lock (exclusive), from detail::exclusive_acquire:
//   async_acquire([options]), async_try_acquire, async_acquire_until(deadline),
//   async_acquire_for(timeout): void(error_code, lock);
// - the read lock: async_acquire_shared([options]), async_try_acquire_shared,
//   async_acquire_shared_until(deadline), async_acquire_shared_for(timeout):
//   void(error_code, lock).
// A try fails with lock_busy unless granted at once, leaving no node; a
// deadline fails with lock_timeout (connecting included), and the node is
// deleted. Cancellation (terminal, partial) completes with operation_aborted
// at once, and the node goes in the background.
class shared_mutex : public detail::lock_object,
                     public detail::exclusive_acquire<shared_mutex, detail::node_kind::write> {
 public:
  // The session must outlive the shared_mutex and every lock of it.
  shared_mutex(session& s, std::string_view path, lock_options options = {})
      : lock_object(s, path, std::move(options), detail::queue_family::read_write) {}

  // The read lock (shared). void(error_code, lock)
  template <class Token = default_token>
    requires detail::token_not<Token, acquire_options>  // options are the other overload's
  auto async_acquire_shared(Token&& token = {}) {
    return detail::async_acquire(state_, {.kind = read}, std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_acquire_shared(const acquire_options& options, Token&& token = {}) {
    return detail::async_acquire(state_, detail::request_of(read, options), std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_try_acquire_shared(Token&& token = {}) {
    return detail::async_acquire(state_, {.kind = read, .try_once = true}, std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_acquire_shared_until(std::chrono::steady_clock::time_point deadline, Token&& token = {}) {
    return detail::async_acquire(state_, {.kind = read, .deadline = deadline}, std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_acquire_shared_for(std::chrono::steady_clock::duration timeout, Token&& token = {}) {
    return detail::async_acquire(state_, {.kind = read, .timeout = timeout}, std::forward<Token>(token));
  }

 private:
  friend class detail::exclusive_acquire<shared_mutex, detail::node_kind::write>;
  static constexpr auto read = detail::node_kind::read;
};

// The critical section `body()` under the write lock: see with_hold (lock.hpp).
template <class Body>
auto with_lock(shared_mutex& m, Body body) -> detail::body_awaitable_t<Body> {
  return with_hold(m.async_acquire(asio::use_awaitable_t<detail::body_executor_t<Body>>{}), std::move(body));
}
// ... and under the read lock.
template <class Body>
auto with_shared_lock(shared_mutex& m, Body body) -> detail::body_awaitable_t<Body> {
  return with_hold(m.async_acquire_shared(asio::use_awaitable_t<detail::body_executor_t<Body>>{}), std::move(body));
}

}  // namespace zkasio
