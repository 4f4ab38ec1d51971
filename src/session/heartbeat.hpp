// Keeps a connected session's last_contact fresh while it is idle: a sync
// (the cheapest request that goes through the leader; a read's answer would
// come from a follower alone) whenever a third of the negotiated timeout has
// passed since the last contact, at most one in flight. On the session's
// strand.
#pragma once

#include <asio/steady_timer.hpp>
#include <zkasio/detail/session_core.hpp>

namespace zkasio::detail {

class session_impl;

class heartbeat {
 public:
  heartbeat(session_impl& session, const session_core::strand_type& strand) : session_(session), timer_(strand) {}

  // Connected: looks every period from now on, until stop() or a lost
  // connection.
  void start();
  void stop() { timer_.cancel(); }

 private:
  struct beat_request;

  session_impl& session_;
  asio::steady_timer timer_;
  bool in_flight_ = false;
};

}  // namespace zkasio::detail
