#include "read_retries.hpp"

#include <algorithm>
#include <zkasio/error.hpp>

namespace zkasio::detail {

void read_retries::park(clock::time_point deadline, std::function<void()> resend,
                        std::function<void(std::error_code)> fail, std::weak_ptr<const void> alive) {
  parked_.push_back({deadline, std::move(resend), std::move(fail)});
  arm_timer(std::move(alive));
}

void read_retries::resend_all() {
  for (auto& parked : std::exchange(parked_, {})) parked.resend();
}

void read_retries::fail_all(std::error_code ec) {
  timer_.cancel();
  for (auto& parked : std::exchange(parked_, {})) parked.fail(ec);
}

void read_retries::arm_timer(std::weak_ptr<const void> alive) {
  if (parked_.empty()) return;
  auto earliest = std::min_element(parked_.begin(), parked_.end(),
                                   [](auto& a, auto& b) { return a.deadline < b.deadline; });
  timer_.expires_at(earliest->deadline);
  timer_.async_wait([this, alive](std::error_code ec) {
    auto owner = alive.lock();
    if (ec || !owner) return;
    auto now = clock::now();
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->deadline <= now) {
        it->fail(make_error_code(zk_error::connection_loss));
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    arm_timer(alive);
  });
}

}  // namespace zkasio::detail
