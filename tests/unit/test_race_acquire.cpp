// The race recipes' acquire (src/recipes/machines/race_acquire.hpp) driven by
// scripted events, without a server: every decision of the race, and the
// interleavings a real server cannot be made to produce at will (a create's
// reply lost, or answered too late to be sure of the session; the session
// expiring between any two steps).
#include <doctest/doctest.h>

#include <zkasio/error.hpp>

#include "recipes/machines/race_acquire.hpp"
#include "scripted.hpp"

using namespace zkasio;
using namespace zkasio::detail;
using ra = race_acquire;

namespace {

constexpr std::uint64_t generation = 7;
constexpr std::int64_t my_session = 0x1234, other_session = 0x9999;

ra::look now(bool sure = true) { return {.generation = generation, .session_id = my_session, .sure = sure}; }
ra::look later_session() { return {.generation = generation + 1, .session_id = other_session}; }

node_stat owned_by(std::int64_t session, std::int64_t czxid = 100) {
  node_stat st;
  st.ephemeral_owner = session;
  st.czxid = czxid;
  return st;
}

zkasio::error_code code(zk_error e) { return make_error_code(e); }
zkasio::error_code cut_off() { return code(zk_error::connection_loss); }

// Connected, its turn taken, its session's id known: it creates.
ra creating(bool try_once = false) {
  ra fsm(try_once);
  auto turn = fsm.start(now());
  REQUIRE(std::holds_alternative<ra::take_turn>(turn));
  CHECK(std::get<ra::take_turn>(turn).wait == !try_once);
  CHECK(fsm.generation() == generation);
  REQUIRE(std::holds_alternative<ra::create>(fsm.resume(ra::turn_taken{}, now())));
  CHECK(fsm.session_id() == my_session);
  return fsm;
}

// Creating, then told the node is there: it asks whose.
ra looking_at_existing(bool try_once = false) {
  auto fsm = creating(try_once);
  REQUIRE(std::holds_alternative<ra::look_up>(fsm.resume(ra::created{code(zk_error::node_exists)}, now())));
  return fsm;
}

// Creating, then the node of another session found: it watches.
ra watching() {
  auto fsm = looking_at_existing();
  REQUIRE(std::holds_alternative<ra::watch>(fsm.resume(ra::looked_up{{}, owned_by(other_session)}, now())));
  return fsm;
}

// A create whose reply was lost: after the connection, a sync.
ra finding() {
  auto fsm = creating();
  auto next = fsm.resume(ra::created{cut_off()}, now());
  REQUIRE(std::holds_alternative<ra::connect>(next));
  CHECK(std::get<ra::connect>(next).after == zk_error::connection_loss);
  REQUIRE(std::holds_alternative<ra::sync>(fsm.resume(ra::connected{}, now())));
  REQUIRE(std::holds_alternative<ra::look_up>(fsm.resume(ra::synced{}, now())));
  return fsm;
}

}  // namespace

TEST_CASE("the node made at the first create, the session sure: granted with its stat") {
  auto fsm = creating();
  auto next = fsm.resume(ra::created{{}, owned_by(my_session, 42)}, now());
  REQUIRE(std::holds_alternative<ra::granted>(next));
  CHECK(std::get<ra::granted>(next).stat.czxid == 42);
  CHECK(fsm.finished());
}

TEST_CASE("not connected at first: it waits for the connection, then for its turn; a try fails at once") {
  ra fsm(false);
  ra::look disconnected{.generation = generation, .connected = false, .awaiting_server = true};
  CHECK(std::holds_alternative<ra::connect>(fsm.start(disconnected)));
  CHECK(std::holds_alternative<ra::take_turn>(fsm.resume(ra::connected{}, now())));
  ra try_once(true);
  CHECK(failure<ra>(try_once.start(disconnected)) == error::not_connected);
  // A session ended for good: the connect says why.
  ra ended(true);
  CHECK(std::holds_alternative<ra::connect>(ended.start({.generation = generation, .connected = false})));
  auto closed = make_error_code(error::session_closed);
  CHECK(failure<ra>(ended.resume(ra::connected{closed}, now())) == closed);
}

TEST_CASE("the session's id not known yet: it connects until it is, then creates") {
  ra fsm(false);
  REQUIRE(std::holds_alternative<ra::take_turn>(fsm.start(now())));
  ra::look no_id{.generation = generation};
  CHECK(std::holds_alternative<ra::connect>(fsm.resume(ra::turn_taken{}, no_id)));
  CHECK(std::holds_alternative<ra::connect>(fsm.resume(ra::connected{}, no_id)));
  CHECK(std::holds_alternative<ra::create>(fsm.resume(ra::connected{}, now())));
  CHECK(fsm.session_id() == my_session);
}

TEST_CASE("the node there, another session's: it watches its deletion, races again, and wins") {
  auto fsm = watching();
  CHECK(std::holds_alternative<ra::create>(fsm.resume(ra::gone{}, now())));
  // Once asked whose, not again: another node_exists is watched at once.
  CHECK(std::holds_alternative<ra::watch>(fsm.resume(ra::created{code(zk_error::node_exists)}, now())));
  CHECK(std::holds_alternative<ra::create>(fsm.resume(ra::gone{}, now())));
  CHECK(std::holds_alternative<ra::granted>(fsm.resume(ra::created{{}, owned_by(my_session)}, now())));
}

TEST_CASE("a try: busy when another has the node, or when another of its session has the turn") {
  auto fsm = looking_at_existing(true);
  CHECK(failure<ra>(fsm.resume(ra::looked_up{{}, owned_by(other_session)}, now())) == error::lock_busy);
  ra turn_taken(true);
  REQUIRE(std::holds_alternative<ra::take_turn>(turn_taken.start(now())));
  CHECK(failure<ra>(turn_taken.resume(ra::turn_taken{{}, false}, now())) == error::lock_busy);
  // The node gone between the create and the look: busy all the same (it
  // does not race again).
  auto vanished = looking_at_existing(true);
  CHECK(failure<ra>(vanished.resume(ra::looked_up{{}, std::nullopt}, now())) == error::lock_busy);
}

TEST_CASE("a node of its own session at the path (a failed delete): removed once, then created again") {
  auto fsm = looking_at_existing();
  auto next = fsm.resume(ra::looked_up{{}, owned_by(my_session, 55)}, now());
  REQUIRE(std::holds_alternative<ra::remove_own>(next));
  CHECK(std::get<ra::remove_own>(next).owner == my_session);
  CHECK(std::get<ra::remove_own>(next).czxid == 55);
  CHECK(std::holds_alternative<ra::create>(fsm.resume(ra::removed{}, now())));
  // Once: a node there again is another's to wait for.
  CHECK(std::holds_alternative<ra::watch>(fsm.resume(ra::created{code(zk_error::node_exists)}, now())));
  // Gone already when removed (lock_lost): as good.
  auto gone = looking_at_existing();
  REQUIRE(std::holds_alternative<ra::remove_own>(gone.resume(ra::looked_up{{}, owned_by(my_session)}, now())));
  CHECK(std::holds_alternative<ra::create>(gone.resume(ra::removed{make_error_code(error::lock_lost)}, now())));
  // The removal failing otherwise: its error.
  auto refused = looking_at_existing();
  REQUIRE(std::holds_alternative<ra::remove_own>(refused.resume(ra::looked_up{{}, owned_by(my_session)}, now())));
  auto no_auth = code(zk_error::no_auth);
  CHECK(failure<ra>(refused.resume(ra::removed{no_auth}, now())) == no_auth);
}

TEST_CASE("a persistent node at the path would be waited for in vain: node_exists") {
  auto fsm = looking_at_existing();
  CHECK(failure<ra>(fsm.resume(ra::looked_up{{}, owned_by(0)}, now())) == zk_error::node_exists);
  auto a_try = looking_at_existing(true);
  CHECK(failure<ra>(a_try.resume(ra::looked_up{{}, owned_by(0)}, now())) == zk_error::node_exists);
}

TEST_CASE("cut off while asking whose the node is: it creates again once connected, and asks again") {
  auto fsm = looking_at_existing();
  auto next = fsm.resume(ra::looked_up{cut_off()}, now());
  REQUIRE(std::holds_alternative<ra::connect>(next));
  CHECK(std::get<ra::connect>(next).after == zk_error::connection_loss);
  CHECK(std::holds_alternative<ra::create>(fsm.resume(ra::connected{}, now())));
  CHECK(std::holds_alternative<ra::look_up>(fsm.resume(ra::created{code(zk_error::node_exists)}, now())));
  // A try does not ride through.
  auto a_try = looking_at_existing(true);
  CHECK(failure<ra>(a_try.resume(ra::looked_up{cut_off()}, now())) == zk_error::connection_loss);
}

TEST_CASE("no parent: the parents are made and it creates again, at most three times") {
  auto fsm = creating();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(std::holds_alternative<ra::make_parents>(fsm.resume(ra::created{code(zk_error::no_node)}, now())));
    REQUIRE(std::holds_alternative<ra::create>(fsm.resume(ra::parents_made{}, now())));
  }
  CHECK(failure<ra>(fsm.resume(ra::created{code(zk_error::no_node)}, now())) == zk_error::no_node);
  // Their making failing: its error.
  auto refused = creating();
  REQUIRE(std::holds_alternative<ra::make_parents>(refused.resume(ra::created{code(zk_error::no_node)}, now())));
  auto no_auth = code(zk_error::no_auth);
  CHECK(failure<ra>(refused.resume(ra::parents_made{no_auth}, now())) == no_auth);
}

TEST_CASE("a lost create reply: the node found owned by its session is granted; not found, it creates again") {
  auto found = finding();
  auto next = found.resume(ra::looked_up{{}, owned_by(my_session, 77)}, now());
  REQUIRE(std::holds_alternative<ra::granted>(next));
  CHECK(std::get<ra::granted>(next).stat.czxid == 77);
  auto absent = finding();
  CHECK(std::holds_alternative<ra::create>(absent.resume(ra::looked_up{{}, std::nullopt}, now())));
  // Another session's node: not its create's.
  auto others = finding();
  CHECK(std::holds_alternative<ra::create>(others.resume(ra::looked_up{{}, owned_by(other_session)}, now())));
  // The parent gone (the sync's no_node): looked up all the same.
  auto no_parent = creating();
  REQUIRE(std::holds_alternative<ra::connect>(no_parent.resume(ra::created{cut_off()}, now())));
  REQUIRE(std::holds_alternative<ra::sync>(no_parent.resume(ra::connected{}, now())));
  CHECK(std::holds_alternative<ra::look_up>(no_parent.resume(ra::synced{code(zk_error::no_node)}, now())));
  // Cut off while finding: connected again, then synced again.
  auto cut = finding();
  REQUIRE(std::holds_alternative<ra::connect>(cut.resume(ra::looked_up{cut_off()}, now())));
  CHECK(std::holds_alternative<ra::sync>(cut.resume(ra::connected{}, now())));
  CHECK(std::holds_alternative<ra::connect>(cut.resume(ra::synced{cut_off()}, now())));
  // A try does not look: a lost reply is its error.
  auto a_try = creating(true);
  CHECK(failure<ra>(a_try.resume(ra::created{cut_off()}, now())) == zk_error::connection_loss);
  // Nor does anyone after an error that is not retryable.
  auto refused = creating();
  auto no_auth = code(zk_error::no_auth);
  CHECK(failure<ra>(refused.resume(ra::created{no_auth}, now())) == no_auth);
}

TEST_CASE("a create or a look answered too late to be sure of the session: the contact confirmed, looked up again until sure") {
  auto fsm = creating();
  REQUIRE(std::holds_alternative<ra::confirm>(fsm.resume(ra::created{{}, owned_by(my_session)}, now(false))));
  auto next = fsm.resume(ra::confirmed{}, now());
  REQUIRE(std::holds_alternative<ra::connect>(next));
  CHECK(!std::get<ra::connect>(next).after);
  REQUIRE(std::holds_alternative<ra::sync>(fsm.resume(ra::connected{}, now())));
  REQUIRE(std::holds_alternative<ra::look_up>(fsm.resume(ra::synced{}, now())));
  // Still too old: again.
  CHECK(std::holds_alternative<ra::confirm>(fsm.resume(ra::looked_up{{}, owned_by(my_session)}, now(false))));
  CHECK(std::holds_alternative<ra::connect>(fsm.resume(ra::confirmed{}, now())));
  REQUIRE(std::holds_alternative<ra::sync>(fsm.resume(ra::connected{}, now())));
  REQUIRE(std::holds_alternative<ra::look_up>(fsm.resume(ra::synced{}, now())));
  CHECK(std::holds_alternative<ra::granted>(fsm.resume(ra::looked_up{{}, owned_by(my_session)}, now())));
}

TEST_CASE("no grant can ever be sure: why, once its node is found") {
  auto fsm = finding();
  ra::look never{.generation = generation, .session_id = my_session, .sure = false,
                 .never_sure = make_error_code(error::invalid_safety_margin)};
  CHECK(failure<ra>(fsm.resume(ra::looked_up{{}, owned_by(my_session)}, never)) == error::invalid_safety_margin);
}

TEST_CASE("the session expired: session_expired (or the failure that told), whichever step learns it") {
  auto expired = code(zk_error::session_expired);
  // Its turn taken in a later session than it queued in.
  ra turn(false);
  REQUIRE(std::holds_alternative<ra::take_turn>(turn.start(now())));
  CHECK(failure<ra>(turn.resume(ra::turn_taken{}, later_session())) == expired);
  // The turn's line ended with the session.
  ra line(false);
  REQUIRE(std::holds_alternative<ra::take_turn>(line.start(now())));
  CHECK(failure<ra>(line.resume(ra::turn_taken{expired, false}, now())) == expired);
  // While it waited for the session's id.
  ra identifying(false);
  REQUIRE(std::holds_alternative<ra::take_turn>(identifying.start(now())));
  REQUIRE(std::holds_alternative<ra::connect>(identifying.resume(ra::turn_taken{}, {.generation = generation})));
  CHECK(failure<ra>(identifying.resume(ra::connected{}, later_session())) == expired);
  // A create cut off as it expired: no riding through into the next session.
  auto create_cut = creating();
  REQUIRE(std::holds_alternative<ra::connect>(create_cut.resume(ra::created{cut_off()}, now())));
  CHECK(failure<ra>(create_cut.resume(ra::connected{}, later_session())) == expired);
  // The node found answered in the next session: not its; before the create, the expiry.
  auto found_later = finding();
  CHECK(failure<ra>(found_later.resume(ra::looked_up{{}, owned_by(other_session)}, later_session())) == expired);
  // A sync cut off as it expired.
  auto sync_later = creating();
  REQUIRE(std::holds_alternative<ra::connect>(sync_later.resume(ra::created{cut_off()}, now())));
  REQUIRE(std::holds_alternative<ra::sync>(sync_later.resume(ra::connected{}, now())));
  CHECK(failure<ra>(sync_later.resume(ra::synced{cut_off()}, later_session())) == zk_error::connection_loss);
  // Watching: the watch fails with the expiry; or the node went, then the session.
  auto watch_failed = watching();
  CHECK(failure<ra>(watch_failed.resume(ra::gone{expired}, now())) == expired);
  auto watch_later = watching();
  CHECK(failure<ra>(watch_later.resume(ra::gone{}, later_session())) == expired);
  // A wait for the connection that ends with the expiry.
  auto connect_failed = watching();
  REQUIRE(std::holds_alternative<ra::connect>(connect_failed.resume(ra::gone{cut_off()}, now())));
  CHECK(failure<ra>(connect_failed.resume(ra::connected{expired}, now())) == expired);
  // Asking whose the node is, then connected in the next session.
  auto own_later = looking_at_existing();
  REQUIRE(std::holds_alternative<ra::connect>(own_later.resume(ra::looked_up{cut_off()}, now())));
  CHECK(failure<ra>(own_later.resume(ra::connected{}, later_session())) == expired);
  // Its own node removed, then the session expired.
  auto removed_later = looking_at_existing();
  REQUIRE(std::holds_alternative<ra::remove_own>(removed_later.resume(ra::looked_up{{}, owned_by(my_session)}, now())));
  CHECK(failure<ra>(removed_later.resume(ra::removed{}, later_session())) == expired);
  // Parents made (make_parents tells an expiry it rode into), or made as it expired.
  auto parents = creating();
  REQUIRE(std::holds_alternative<ra::make_parents>(parents.resume(ra::created{code(zk_error::no_node)}, now())));
  CHECK(failure<ra>(parents.resume(ra::parents_made{expired}, now())) == expired);
  auto parents_later = creating();
  REQUIRE(std::holds_alternative<ra::make_parents>(parents_later.resume(ra::created{code(zk_error::no_node)}, now())));
  CHECK(failure<ra>(parents_later.resume(ra::parents_made{}, later_session())) == expired);
}

TEST_CASE("a create or a look answered in a session that ended before it was read: session_expired, never granted") {
  // A process paused past its timeout reads, on waking, the answer that
  // came before the pause, once the next session is connected and sure:
  // the node went with the first session (another may hold the lock now).
  // Found by the chaos suite (seed 600, a race_mutex): granted the old
  // incarnation, its lost signal 0.3 ms later, its token below the last.
  auto next_session_sure = ra::look{.generation = generation + 1, .session_id = other_session, .sure = true};
  auto created = creating();
  CHECK(failure<ra>(created.resume(ra::created{{}, owned_by(my_session)}, next_session_sure)) ==
        zk_error::session_expired);
  // The look after a lost reply, the same way: its own node, of the session that ended.
  auto found = finding();
  CHECK(failure<ra>(found.resume(ra::looked_up{{}, owned_by(my_session)}, next_session_sure)) ==
        zk_error::session_expired);
}

TEST_CASE("cut off while watching: it rides through, connected again, and races again") {
  auto fsm = watching();
  auto next = fsm.resume(ra::gone{cut_off()}, now());
  REQUIRE(std::holds_alternative<ra::connect>(next));
  CHECK(std::get<ra::connect>(next).after == zk_error::connection_loss);
  CHECK(std::holds_alternative<ra::create>(fsm.resume(ra::connected{}, now())));
  // A busy server: its answer passed on, for a pause before asking again.
  auto busy = watching();
  auto throttled = busy.resume(ra::gone{code(zk_error::throttled_op)}, now());
  REQUIRE(std::holds_alternative<ra::connect>(throttled));
  CHECK(std::get<ra::connect>(throttled).after == zk_error::throttled_op);
}

TEST_CASE("an event the last action did not ask for is the runner's broken promise: internal_error") {
  auto fsm = creating();
  CHECK(failure<ra>(fsm.resume(ra::gone{}, now())) == error::internal_error);
  CHECK(fsm.finished());
  CHECK(failure<ra>(fsm.resume(ra::created{}, now())) == error::internal_error);  // finished
  auto look = looking_at_existing();
  CHECK(failure<ra>(look.resume(ra::synced{}, now())) == error::internal_error);
  ra turn(false);
  REQUIRE(std::holds_alternative<ra::take_turn>(turn.start(now())));
  CHECK(failure<ra>(turn.resume(ra::connected{}, now())) == error::internal_error);
}
