#include "heartbeat.hpp"

#include <algorithm>

#include "requests.hpp"
#include "session_impl.hpp"

namespace zkasio::detail {

struct heartbeat::beat_request : request<> {
  heartbeat* beat = nullptr;
};

heartbeat::clock::time_point heartbeat::due() const {
  if (!session_.connected()) return clock::time_point::max();
  auto at = last_answer_ + session_.negotiated_timeout() / 8;
  if (!confirmations_.empty()) {
    auto since = std::min_element(confirmations_.begin(), confirmations_.end(), [](auto& a, auto& b) {
                   return a.first < b.first;
                 })->first;
    // A request answered since then is certified by a beat sent a lag after
    // its answer; without one, a beat now is such a request.
    auto answered = session_.contacts().answered_since(since);
    at = std::min(at, answered == clock::time_point::max() ? clock::now() : answered + session_.contact_lag());
  }
  // (A beat the C client refused is not tried again at once.)
  return std::max(at, refused_at_ + session_.negotiated_timeout() / 8);
}

void heartbeat::schedule() {
  if (in_flight_) return;  // (its answer schedules again)
  auto at = due();
  if (at == clock::time_point::max()) return stop();
  timer_.expires_at(at);
  // (The session owns this: alive while the session is.)
  timer_.async_wait([this, weak = session_.weak_from_this()](error_code ec) {
    auto alive = weak.lock();
    if (ec || !alive || in_flight_) return;
    if (clock::now() >= due()) send();
    schedule();
  });
}

void heartbeat::send() {
  c_client_scope scope(&session_.options());
  auto r = std::make_unique<beat_request>();
  r->session = &session_;
  r->beat = this;
  int rc = zoo_async(
      session_.handle(), "/",
      [](int rc, const char*, const void* context) {
        auto* beat = take_back<beat_request>(context, rc)->beat;
        beat->in_flight_ = false;
        beat->schedule();
      },
      r.get());
  if (rc != ZOK) {
    refused_at_ = clock::now();
    return;
  }
  r.release();
  in_flight_ = true;
  session_.after_submit();
}

void heartbeat::answered(bool through_leader) {
  if (through_leader) last_answer_ = clock::now();
  if (confirmations_.empty()) return;
  auto certified = session_.last_contact();
  for (auto it = confirmations_.begin(); it != confirmations_.end();) {
    if (it->first <= certified) {
      it->second->complete({});
      it = confirmations_.erase(it);
    } else {
      ++it;
    }
  }
  if (!confirmations_.empty()) schedule();
}

void heartbeat::confirm(clock::time_point since, completion_ptr<> done) {
  if (since <= session_.last_contact()) return done->complete({});
  auto it = confirmations_.emplace(confirmations_.end(), since, done);
  done->on_cancel = [this, it] { confirmations_.erase(it); };
  schedule();
}

void heartbeat::fail_confirmations(error_code ec) {
  for (auto& [since, done] : std::exchange(confirmations_, {})) done->complete(ec);
}

}  // namespace zkasio::detail
