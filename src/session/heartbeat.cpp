#include "heartbeat.hpp"

#include "requests.hpp"
#include "session_impl.hpp"

namespace zkasio::detail {

struct heartbeat::beat_request : request<> {
  heartbeat* beat = nullptr;
};

void heartbeat::start() {
  using clock = session_core::clock;
  auto period = session_.negotiated_timeout() / 3;
  // Next look: a period after the last contact, or, while a heartbeat is in
  // flight (its answer moves last_contact), a period from now.
  timer_.expires_at(in_flight_ ? clock::now() + period : session_.last_contact() + period);
  // (The session owns this: alive while the session is.)
  timer_.async_wait([this, weak = session_.weak_from_this(), period](error_code ec) {
    auto alive = weak.lock();
    if (ec || !alive || !session_.connected()) return;
    if (!in_flight_ && clock::now() - session_.last_contact() >= period) {
      c_client_scope scope(&session_.options());
      auto r = std::make_unique<beat_request>();
      r->session = &session_;
      r->beat = this;
      int rc = zoo_async(
          session_.handle(), "/",
          [](int rc, const char*, const void* context) { take_back<beat_request>(context, rc)->beat->in_flight_ = false; },
          r.get());
      if (rc == ZOK) {
        r.release();
        in_flight_ = true;
        session_.after_submit();
      }
    }
    start();
  });
}

}  // namespace zkasio::detail
