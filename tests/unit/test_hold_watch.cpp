// What a holder's monitor decides (src/recipes/machines/hold_watch.hpp), by
// scripted looks at its session and answers about its node, without a
// server: one case for each of the README's guarantees on the holder's side
// (the connection drops and the session lives; the session expires; the
// servers stop answering; an operator deletes the node; a revocation; the
// session closed), under both policies.
#include <doctest/doctest.h>

#include <zkasio/error.hpp>

#include "recipes/machines/hold_watch.hpp"

using namespace zkasio;
using namespace zkasio::detail;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t generation = 3;
const session_watch::time_point start{10s};
const auto sure_until = start + 4s;  // last contact + timeout - margin

session_watch::look at(session_watch::time_point now, session_state state = session_state::connected,
                       std::uint64_t gen = generation) {
  return {.generation = gen, .state = state, .now = now, .sure_until = sure_until};
}

}  // namespace

TEST_CASE("held and connected: no loss; it looks again at the session's sure time") {
  session_watch watch(generation, true, lost_policy::before_expiry);
  auto v = watch.judge(at(start));
  CHECK(v.why == loss::none);
  CHECK(v.look_again == sure_until);
}

TEST_CASE("the connection drops, the session lives: before_expiry keeps the lock until the sure time, on_suspend not") {
  session_watch patient(generation, true, lost_policy::before_expiry);
  CHECK(patient.judge(at(start + 1s, session_state::suspended)).why == loss::none);
  CHECK(patient.judge(at(start + 1s, session_state::suspended)).look_again == sure_until);
  // Connected again: its last contact moved, and with it the sure time.
  auto again = at(start + 2s);
  again.sure_until = start + 6s;
  CHECK(patient.judge(again).look_again == start + 6s);
  session_watch eager(generation, true, lost_policy::on_suspend);
  CHECK(eager.judge(at(start + 1s, session_state::suspended)).why == loss::may_be_lost);
  CHECK(eager.judge(at(start + 1s)).why == loss::none);
}

TEST_CASE("on_expiry (a presence node's): a disconnection and the sure time are no loss; the session's end is") {
  session_watch watch(generation, true, lost_policy::on_expiry);
  auto v = watch.judge(at(sure_until + 1h, session_state::suspended));
  CHECK(v.why == loss::none);
  CHECK(v.look_again == session_watch::time_point::max());  // only a change of state counts
  CHECK(watch.judge(at(sure_until + 1h, session_state::connecting)).why == loss::none);
  CHECK(watch.judge(at(start, session_state::expired)).why == loss::session_over);
  CHECK(watch.judge(at(start, session_state::closed)).why == loss::session_closed);
}

TEST_CASE("the servers stop answering: the lost signal at the sure time, connected or not, before the server can expire it") {
  for (auto state : {session_state::connected, session_state::suspended, session_state::connecting}) {
    session_watch watch(generation, true, lost_policy::before_expiry);
    CHECK(watch.judge(at(sure_until - 1ms, state)).why == loss::none);
    CHECK(watch.judge(at(sure_until, state)).why == loss::may_be_lost);
  }
}

TEST_CASE("the session expires, or another began: session_over; closed or its authentication failed: session_closed") {
  for (bool deadlines : {true, false}) {
    session_watch watch(generation, deadlines, lost_policy::before_expiry);
    CHECK(watch.judge(at(start, session_state::expired)).why == loss::session_over);
    CHECK(watch.judge(at(start, session_state::connected, generation + 1)).why == loss::session_over);
    CHECK(watch.judge(at(start, session_state::closed)).why == loss::session_closed);
    CHECK(watch.judge(at(start, session_state::auth_failed)).why == loss::session_closed);
  }
}

TEST_CASE("once the lock may be lost, only the session's end counts: its node is watched until known gone") {
  session_watch after(generation, false, lost_policy::on_suspend);
  CHECK(after.judge(at(sure_until + 1s, session_state::suspended)).why == loss::none);
  CHECK(after.judge(at(sure_until + 1s)).look_again == session_watch::time_point::max());
  CHECK(after.judge(at(sure_until + 1s, session_state::expired)).why == loss::session_over);
}

TEST_CASE("an operator deletes the holder's node: node_gone, whether the watch or the read tells") {
  CHECK(after_node_event({}, event_type::deleted) == loss::node_gone);
  // The data changed, then the node went before the read.
  CHECK_FALSE(after_node_event({}, event_type::data_changed).has_value());
  CHECK(after_node_read(make_error_code(zk_error::no_node), false, false) == loss::node_gone);
  // Deleted and made again by another (another incarnation): gone all the same.
  CHECK(after_node_read({}, false, false) == loss::node_gone);
}

TEST_CASE("a revocation (the node's data set to Curator's request): may_be_lost, the node still there") {
  CHECK_FALSE(after_node_event({}, event_type::data_changed).has_value());
  CHECK(after_node_read({}, true, true) == loss::may_be_lost);
  // Other data: nothing lost, the node watched again.
  CHECK_FALSE(after_node_read({}, true, false).has_value());
}

TEST_CASE("a watch or a read that fails says what its error says of the session") {
  CHECK(after_node_event(make_error_code(zk_error::session_expired), event_type::deleted) == loss::session_over);
  CHECK(after_node_event(make_error_code(error::session_closed), event_type::deleted) == loss::session_closed);
  CHECK(after_node_event(make_error_code(zk_error::auth_failed), event_type::deleted) == loss::session_closed);
  CHECK(after_node_read(make_error_code(zk_error::connection_loss), true, false) == loss::may_be_lost);
  CHECK(loss_of(make_error_code(zk_error::session_expired)) == loss::session_over);
}
