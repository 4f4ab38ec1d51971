// Requests waiting for the connection, on the session's strand: every
// request submitted while no server is connected (no session carried it, so
// it cannot have been applied: it goes once connected), and the reads that
// hit a connection loss (sent again within read_retry_timeout). Each is sent
// once connected, in the order parked (a create parked before a listing is
// sent before it: zkasio::mutex relies on it, see send_create in
// src/recipes/engine/acquire_runner.cpp), or fails at its deadline (connection_loss) or with
// the session's end.
#pragma once

#include <asio/steady_timer.hpp>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <zkasio/detail/session_core.hpp>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

class parked_requests {
 public:
  using clock = session_core::clock;

  explicit parked_requests(const session_core::strand_type& strand) : timer_(strand) {}

  // `resend` once connected, or `fail` at `deadline` (connection_loss).
  // `abandoned`: true once its caller gave up (cancelled): then dropped
  // unsent. `alive`: the owner, which the deadline's timer handler checks
  // before it touches this.
  void park(clock::time_point deadline, std::function<void()> resend, std::function<void(error_code)> fail,
            std::function<bool()> abandoned, std::weak_ptr<const void> alive);
  // Connected: every parked request goes, in order.
  void resend_all();
  // Every parked request fails with `ec`; the timer stops.
  void fail_all(error_code ec);

 private:
  struct parked_request {
    clock::time_point deadline;
    std::function<void()> resend;
    std::function<void(error_code)> fail;
    std::function<bool()> abandoned;
  };
  // The timer, to fail what is parked until `at` (max: not armed).
  void arm_timer(clock::time_point at, std::weak_ptr<const void> alive);

  std::list<parked_request> parked_;
  // When the list is this long, the abandoned go (amortized: a long
  // disconnection with many cancelled requests does not grow it for ever).
  std::size_t sweep_at_ = 64;
  asio::steady_timer timer_;
  clock::time_point armed_ = clock::time_point::max();  // the timer's expiry, max when not armed
};

}  // namespace zkasio::detail
