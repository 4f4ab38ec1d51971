// Reads that hit a connection loss, parked until the session is connected
// again (then sent again) or their deadline passes (then failed with
// connection_loss). On the session's strand.
#pragma once

#include <asio/steady_timer.hpp>
#include <functional>
#include <list>
#include <memory>
#include <zkasio/detail/session_core.hpp>

namespace zkasio::detail {

class read_retries {
 public:
  using clock = session_core::clock;

  explicit read_retries(const session_core::strand_type& strand) : timer_(strand) {}

  // `resend` once connected, or `fail` at `deadline`. `alive`: the owner,
  // which the deadline's timer handler checks before it touches this.
  void park(clock::time_point deadline, std::function<void()> resend, std::function<void(std::error_code)> fail,
            std::weak_ptr<const void> alive);
  // Connected: every parked read goes again.
  void resend_all();
  // Every parked read fails with `ec`; the timer stops.
  void fail_all(std::error_code ec);

 private:
  struct parked_read {
    clock::time_point deadline;
    std::function<void()> resend;
    std::function<void(std::error_code)> fail;
  };
  void arm_timer(std::weak_ptr<const void> alive);

  std::list<parked_read> parked_;
  asio::steady_timer timer_;
};

}  // namespace zkasio::detail
