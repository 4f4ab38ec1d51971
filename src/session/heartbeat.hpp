// Keeps a connected session's last_contact fresh (contact_tracker.hpp says
// what proves a contact), and confirms it on request. A sync (the cheapest
// request that goes through the leader) goes whenever no request through
// the leader was answered for an eighth of the negotiated timeout; while a
// caller waits for a contact after some moment (confirm), one goes at once
// if no request answered since that moment could be certified, and another
// `lag` after such an answer (its answer then certifies it). At most one in
// flight. On the session's strand.
//
// Why an eighth: a beat certifies what was answered a lag before it was
// sent, so an idle session's last_contact is at most ceil(lag / period)
// periods, one more, and two round trips old: 3.75 s for the default 10 s
// session on servers of ZooKeeper's default tickTime (lag 2 s), which
// leaves a holder at least 6 s of a cut before its lost signal
// (before_expiry, the default margin; docs/guarantees.md).
#pragma once

#include <asio/steady_timer.hpp>
#include <list>
#include <utility>
#include <zkasio/detail/session_core.hpp>

namespace zkasio::detail {

class session_impl;

class heartbeat {
 public:
  using clock = session_core::clock;

  heartbeat(session_impl& session, const session_core::strand_type& strand) : session_(session), timer_(strand) {}

  // Connected: beats from now on, until stop() or a lost connection.
  void start() { schedule(); }
  void stop() { timer_.cancel(); }
  // A request through the leader was answered, or the certified contact
  // moved: confirmations it satisfies complete, and the next beat is due
  // from now.
  void answered(bool through_leader);
  // Completes `done` once last_contact() is at or after `since`.
  void confirm(clock::time_point since, completion_ptr<> done);
  // Completes every confirmation waiting with `ec` (the session ended).
  void fail_confirmations(error_code ec);

 private:
  struct beat_request;
  void schedule();
  void send();
  // When the next beat is due: time_point::max() for none.
  clock::time_point due() const;

  session_impl& session_;
  asio::steady_timer timer_;
  bool in_flight_ = false;
  clock::time_point last_answer_{};  // of a request through the leader
  clock::time_point refused_at_{};   // the last beat the C client refused at once
  std::list<std::pair<clock::time_point, completion_ptr<>>> confirmations_;
};

}  // namespace zkasio::detail
