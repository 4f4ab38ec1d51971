// What a session's replies prove of the leader's sight of it: the session's
// last_contact (session_core::last_contact), a time at which the server that
// can expire the session (the leader; a standalone server is its own) is
// known to have touched it. Without I/O: tests/unit/test_contact_tracker.cpp
// scripts it.
//
// Why a reply alone does not prove it (ZooKeeper 3.8's session tracking):
// - Only the leader expires sessions (SessionTrackerImpl): a touch at time t
//   puts the session in the bucket roundToNextInterval(t + timeout), a
//   multiple of tickTime strictly after t + timeout (ExpiryQueue.update), and
//   the expirer expires a bucket once its time has come (ExpiryQueue.poll).
//   So a session touched at t is not expired before t + timeout.
// - A server touches a session at every request of it that it receives
//   (ZooKeeperServer.submitRequest), reads and pings too. A leader touches
//   its tracker at once; a follower only records the touch in its touch
//   table (LearnerSessionTracker.touchSession), which it hands to the leader
//   in its reply to the leader's next ping (Learner.ping; LearnerHandler on
//   Leader.PING calls touch), and the leader pings every tickTime / 2
//   (Leader.lead). A request a follower forwards to the leader (a write, a
//   sync) does not touch the session there (submitLearnerRequest goes
//   straight to the PrepRequestProcessor).
// - So a follower that answers and is cut off from its leader before the
//   next ping leaves the leader with the touch before: an answer proves the
//   follower saw the session, not that the leader did.
// What does prove it: a follower sends its ping replies and the requests it
// forwards on one connection, which the leader reads in order, and a
// follower that loses its leader closes its clients' connections
// (Learner.shutdown). If a request R was answered (so received by the
// server) at a_R, and a request S that went through the leader (a write or
// a sync) was sent on the same connection at s_S >= a_R + lag, where lag is
// one ping period (tickTime / 2) plus at most as much again for the ping's
// delivery, then a ping reached the server between R's touch and S's
// forwarding, and its reply, which carried R's touch, reached the leader
// before S did. S's answer then proves that the leader touched the session
// at a time no earlier than R was sent. The handshake of a connection is
// such a proof of itself: a follower revalidates an existing session with
// the leader (REVALIDATE, which touches it) before it answers.
//
// The assumption: the leader's pings reach the server within lag of each
// other (ZooKeeper itself drops a follower only once it lags syncLimit
// ticks: a follower whose traffic from the leader is held up longer than a
// tick can report a touch later than this assumes).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>

namespace zkasio::detail {

class contact_tracker {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  // A connection's handshake answered; the server saw the session at `seen`
  // or later, and so did the leader. What the former connection's server
  // saw and did not report is forgotten: it may never reach the leader.
  void connected(time_point seen);
  // A request sent at `submitted` was answered at `answered` on the current
  // connection; `through_leader`: a write or a sync. `lag` as above.
  void answered(time_point submitted, time_point answered, bool through_leader, clock::duration lag);

  // The latest time the leader is known to have touched the session.
  time_point certified() const noexcept { return certified_; }
  // The answer time of the first request sent at or after `since` and not
  // yet certified (time_point::max when none): a request through the leader
  // sent `lag` after it certifies `since`.
  time_point answered_since(time_point since) const noexcept;

 private:
  // Requests answered, merged: what the latest of them was sent at, the
  // latest answer (the merge is certified no sooner than each of them would
  // be), and the first answer.
  struct contact {
    time_point submitted, answered, opened;
  };
  // Answered, not certified yet, in the order answered. Bounded: answers
  // within a quarter lag of a contact's first merge into it, and when full,
  // the two oldest merge.
  static constexpr std::size_t most = 16;
  std::array<contact, most> pending_{};
  std::size_t count_ = 0;
  time_point certified_{};
};

}  // namespace zkasio::detail
