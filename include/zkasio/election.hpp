// zkasio::election: leader election, in two ways: the fair queue (as
// Curator's LeaderLatch) and the race for one node (as the non-fair lock).
//
// Fair mode (the default): every candidate creates an EPHEMERAL_SEQUENTIAL
// node under the election path, named as Apache Curator's LeaderLatch names
// its participants ("_c_<uuid>-latch-<seq>"), so that Curator LeaderLatch
// participants and zkasio candidates on one path elect one leader among
// them. The lowest sequence leads; every other candidate waits for the
// deletion of its immediate predecessor only. Candidates lead in the order
// they campaigned. Before a candidate is told it leads, it checks that its
// node is there and that its ephemeral owner is its own session (Curator's
// CURATOR-696: a LeaderLatch that took a node of another session for its own
// was leader beside the real one).
//
// Race mode: one EPHEMERAL node at the election path itself, made by whoever
// is first; the others watch it and race again when it goes (race_mutex.hpp:
// every change of leader wakes every candidate).
//
// Leadership is a zkasio::lock (lock.hpp) with async_resign(): its lost
// signal fires the moment leadership may be lost (session expired or, under
// the policy, disconnected too long; the node deleted by someone else), its
// fencing token (the node's czxid) grows with every new leader, and its
// destructor resigns. with_leadership runs the leader's work bound to the
// lost signal.
//
// Cancellation: async_campaign honours terminal and partial cancellation at
// every stage (operation_aborted; the candidate's node is deleted in the
// background). The observers (async_leader, async_leader_changed) have no
// effect to undo: cancelled, they complete with operation_aborted.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>

namespace zkasio {

enum class election_mode {
  fair,  // sequential candidates, Curator LeaderLatch's layout
  race,  // one ephemeral node at the path, raced for
};

// A candidate's leadership: a lock; resigning is releasing it.
class leadership : public lock {
 public:
  leadership() = default;
  explicit leadership(lock held) : lock(std::move(held)) {}

  // Resigns (deletes the candidate's node; the next candidate leads).
  // Completes as async_release does: lock_lost if leadership had been lost.
  template <class Token = default_token>
  auto async_resign(Token&& token = {}) {
    return async_release(std::forward<Token>(token));
  }
};

class election : public detail::engine_handle {
 public:
  // The session must outlive the election and every leadership of it.
  // Throws invalid_path (system_error) for a path that cannot be one.
  // (`options.data` is unused: each campaign writes its own.)
  election(session& s, std::string_view path, election_mode mode = election_mode::fair, lock_options options = {})
      : engine_handle(s, path, std::move(options),
                      mode == election_mode::fair ? detail::queue_family::election : detail::queue_family::race) {}

  election_mode mode() const {
    return detail::family_of(*state_) == detail::queue_family::race ? election_mode::race : election_mode::fair;
  }

  // Campaigns with `data` (shown to observers, e.g. "host:port") and
  // completes when this candidate leads. void(error_code, leadership)
  template <class Token = default_token>
  auto async_campaign(std::string data, Token&& token = {}) {
    return campaign({.data = std::move(data)}, std::forward<Token>(token));
  }
  // lock_timeout at `deadline` (the candidate's node is deleted).
  template <class Token = default_token>
  auto async_campaign_until(std::string data, std::chrono::steady_clock::time_point deadline, Token&& token = {}) {
    return campaign({.deadline = deadline, .data = std::move(data)}, std::forward<Token>(token));
  }
  template <class Token = default_token>
  auto async_campaign_for(std::string data, std::chrono::steady_clock::duration timeout, Token&& token = {}) {
    return campaign({.timeout = timeout, .data = std::move(data)}, std::forward<Token>(token));
  }

  // Who leads now, with the data it campaigned with; nullopt: nobody.
  // void(error_code, optional<leader>)
  template <class Token = default_token>
  auto async_leader(Token&& token = {}) {
    return detail::async_current_leader(state_, std::forward<Token>(token));
  }
  // Completes when the leader differs from `last_seen` (the last answer of
  // async_leader or of this), with the new one: at once if it changed since,
  // so a loop of these never misses a change (it may see only the latest of
  // several quick ones). void(error_code, optional<leader>)
  template <class Token = default_token>
  auto async_leader_changed(std::optional<leader> last_seen, Token&& token = {}) {
    return detail::async_leader_change(state_, std::move(last_seen), std::forward<Token>(token));
  }

 private:
  template <class Token>
  auto campaign(detail::acquire_request request, Token&& token) {
    request.kind = detail::node_kind::latch;
    request.confirm_owner = true;
    return detail::async_acquire_as<leadership>(state_, std::move(request), std::forward<Token>(token));
  }
};

// Campaigns in `e` with `data`, then runs `body()` (returning an
// asio::awaitable) as the leader: see with_hold (lock.hpp); returning from it
// resigns.
template <class Body>
auto with_leadership(election& e, std::string data, Body body) -> detail::body_awaitable_t<Body> {
  using executor_type = detail::body_executor_t<Body>;
  auto leading = [](election& e, std::string data) -> asio::awaitable<lock, executor_type> {
    co_return static_cast<lock&&>(co_await e.async_campaign(std::move(data), asio::use_awaitable_t<executor_type>{}));
  };
  return with_hold(leading(e, std::move(data)), std::move(body));
}

}  // namespace zkasio
