#include "contact_tracker.hpp"

#include <algorithm>

namespace zkasio::detail {

void contact_tracker::connected(time_point seen) {
  count_ = 0;
  certified_ = std::max(certified_, seen);
}

void contact_tracker::answered(time_point submitted, time_point answered, bool through_leader,
                               clock::duration lag) {
  if (through_leader) {
    // Every request answered `lag` before this one was sent: a ping's reply
    // told the leader of it before this request reached the leader.
    std::size_t done = 0;
    while (done < count_ && pending_[done].answered + lag <= submitted)
      certified_ = std::max(certified_, pending_[done++].submitted);
    std::copy(pending_.begin() + static_cast<std::ptrdiff_t>(done),
              pending_.begin() + static_cast<std::ptrdiff_t>(count_), pending_.begin());
    count_ -= done;
  }
  // Worth keeping only if it may certify a later time than what is kept:
  // one sent no later than an earlier answered one certifies nothing more.
  if (submitted <= certified_ || (count_ > 0 && submitted <= pending_[count_ - 1].submitted)) return;
  if (count_ > 0 && answered - pending_[count_ - 1].opened < lag / 4) {
    pending_[count_ - 1].submitted = submitted;
    pending_[count_ - 1].answered = answered;
    return;
  }
  if (count_ == most) {
    pending_[1] = {std::max(pending_[0].submitted, pending_[1].submitted),
                   std::max(pending_[0].answered, pending_[1].answered), pending_[0].opened};
    std::copy(pending_.begin() + 1, pending_.end(), pending_.begin());
    --count_;
  }
  pending_[count_++] = {submitted, answered, answered};
}

contact_tracker::time_point contact_tracker::answered_since(time_point since) const noexcept {
  for (std::size_t i = 0; i < count_; ++i)
    if (pending_[i].submitted >= since) return pending_[i].answered;
  return time_point::max();
}

}  // namespace zkasio::detail
