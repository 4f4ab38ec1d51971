#include "recipes/machines/hold_watch.hpp"

#include <zkasio/error.hpp>

namespace zkasio::detail {

loss loss_of(error_code ec) {
  // (A session whose authentication failed lives on the server until it expires.)
  if (ec == error::session_closed || ec == zk_error::auth_failed) return loss::session_closed;
  return ec == zk_error::session_expired ? loss::session_over : loss::may_be_lost;
}

session_watch::verdict session_watch::judge(const look& now) const {
  if (now.generation != generation_ || now.state == session_state::expired) return {loss::session_over};
  if (now.state == session_state::closed || now.state == session_state::auth_failed) return {loss::session_closed};
  if (!deadlines_ || policy_ == lost_policy::on_expiry) return {};
  if (now.state == session_state::suspended && policy_ == lost_policy::on_suspend) return {loss::may_be_lost};
  if (now.now >= now.sure_until) return {loss::may_be_lost};
  return {loss::none, now.sure_until};
}

std::optional<loss> after_node_event(error_code ec, event_type event) {
  if (ec) return loss_of(ec);
  if (event == event_type::deleted) return loss::node_gone;
  return std::nullopt;
}

std::optional<loss> after_node_read(error_code ec, bool same_incarnation, bool revoked) {
  if (ec == zk_error::no_node || (!ec && !same_incarnation)) return loss::node_gone;
  if (ec || revoked) return loss_of(ec);
  return std::nullopt;
}

}  // namespace zkasio::detail
