#include <zkasio/session.hpp>

namespace zkasio {

session::session(const executor_type& executor, session_options options)
    : executor_(executor),
      hosts_(std::make_shared<const std::string>(options.hosts)),
      core_(detail::session_core::make(executor, std::move(options))) {}

session::~session() {
  if (core_) {
    asio::dispatch(core_->strand(), [c = core_] { c->abandon(); });
  }
}

session& session::operator=(session&& other) noexcept {
  if (this != &other) {
    session old(std::move(*this));
    executor_ = std::move(other.executor_);
    hosts_ = std::move(other.hosts_);
    core_ = std::move(other.core_);
    view_ = std::move(other.view_);
    pinned_ = other.pinned_;
  }
  return *this;
}

const char* to_string(session_state state) noexcept {
  switch (state) {
    case session_state::connecting: return "connecting";
    case session_state::connected: return "connected";
    case session_state::suspended: return "suspended";
    case session_state::expired: return "expired";
    case session_state::auth_failed: return "auth_failed";
    case session_state::closed: return "closed";
  }
  return "unknown";
}

}  // namespace zkasio
