#include "parked_requests.hpp"

#include <algorithm>
#include <zkasio/error.hpp>

namespace zkasio::detail {

void parked_requests::park(clock::time_point deadline, std::function<void()> resend,
                           std::function<void(error_code)> fail, std::function<bool()> abandoned,
                           std::weak_ptr<const void> alive) {
  if (parked_.size() >= sweep_at_) {
    std::erase_if(parked_, [](const parked_request& p) { return p.abandoned(); });
    sweep_at_ = std::max<std::size_t>(64, 2 * parked_.size());
  }
  parked_.push_back({deadline, std::move(resend), std::move(fail), std::move(abandoned)});
  if (deadline < armed_) arm_timer(deadline, std::move(alive));
}

void parked_requests::resend_all() {
  timer_.cancel();
  armed_ = clock::time_point::max();
  for (auto& parked : std::exchange(parked_, {}))
    if (!parked.abandoned()) parked.resend();
}

void parked_requests::fail_all(error_code ec) {
  timer_.cancel();
  armed_ = clock::time_point::max();
  for (auto& parked : std::exchange(parked_, {})) parked.fail(ec);
}

void parked_requests::arm_timer(clock::time_point at, std::weak_ptr<const void> alive) {
  armed_ = at;
  if (at == clock::time_point::max()) return;
  timer_.expires_at(at);
  timer_.async_wait([this, alive](error_code ec) {
    auto owner = alive.lock();
    if (ec || !owner) return;
    auto now = clock::now();
    auto next = clock::time_point::max();
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->deadline <= now) {
        it->fail(make_error_code(zk_error::connection_loss));
        it = parked_.erase(it);
      } else {
        next = std::min(next, it->deadline);
        ++it;
      }
    }
    arm_timer(next, alive);
  });
}

}  // namespace zkasio::detail
