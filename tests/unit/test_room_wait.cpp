// The semaphore's wait for room (src/recipes/machines/room_wait.hpp) driven by
// scripted events, without a server: every decision of the wait, and the
// interleavings a real server cannot be made to produce at will (the
// semaphore's mutex lost while a listing is in flight, with and without
// room; a watch failing as the session expires).
#include <doctest/doctest.h>

#include <zkasio/error.hpp>

#include "recipes/machines/room_wait.hpp"
#include "scripted.hpp"

using namespace zkasio;
using namespace zkasio::detail;
using rw = room_wait;

namespace {

constexpr std::uint64_t generation = 7;
const std::string lease_a = "_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000001";
const std::string lease_b = "_c_7c9e6679-7425-40de-944b-e07fc1f90ae7-lease-0000000002";
const std::string mine = "_c_6ba7b810-9dad-11d1-80b4-00c04fd430c8-lease-0000000003";

rw::look now(bool sure = true, bool mutex_lost = false) { return {generation, sure, {}, mutex_lost}; }
rw::look later_session() { return {generation + 1, true, {}, false}; }

// One lease of a semaphore of `max`, started: it lists first.
rw started(std::size_t max = 2, bool try_once = false) {
  rw fsm({.names = {mine}, .generation = generation, .max = max, .one_look = try_once});
  CHECK(std::holds_alternative<rw::list>(fsm.start(now())));
  return fsm;
}

zkasio::error_code cut_off() { return make_error_code(zk_error::connection_loss); }

}  // namespace

TEST_CASE("room at the first look, the session sure: granted") {
  auto fsm = started();
  CHECK(std::holds_alternative<rw::granted>(fsm.resume(rw::listed{{}, {lease_a, mine}, 4}, now())));
  CHECK(fsm.finished());
}

TEST_CASE("no room: it watches the children from the listing's version, and looks again when they change") {
  auto fsm = started();
  auto next = fsm.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now());
  REQUIRE(std::holds_alternative<rw::watch>(next));
  CHECK(std::get<rw::watch>(next).cversion == 9);
  CHECK(std::holds_alternative<rw::list>(fsm.resume(rw::changed{}, now())));
  CHECK(std::holds_alternative<rw::granted>(fsm.resume(rw::listed{{}, {lease_b, mine}, 10}, now())));
}

TEST_CASE("a try is one look: busy without room, and a lost connection ends it") {
  auto busy = started(2, true);
  CHECK(failure<rw>(busy.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now())) == error::lock_busy);
  auto cut = started(2, true);
  CHECK(failure<rw>(cut.resume(rw::listed{cut_off()}, now())) == zk_error::connection_loss);
}

TEST_CASE("one of its leases gone (an operator's delete): lock_lost, whatever the room") {
  auto fsm = started();
  CHECK(failure<rw>(fsm.resume(rw::listed{{}, {lease_a}, 3}, now())) == error::lock_lost);
}

TEST_CASE("cut off while listing or watching: it waits for the connection and lists again") {
  auto listing = started();
  auto next = listing.resume(rw::listed{cut_off()}, now());
  REQUIRE(std::holds_alternative<rw::connect>(next));
  CHECK(std::get<rw::connect>(next).after == zk_error::connection_loss);
  CHECK(std::holds_alternative<rw::list>(listing.resume(rw::connected{}, now())));
  CHECK(std::holds_alternative<rw::granted>(listing.resume(rw::listed{{}, {mine}, 1}, now())));

  auto watching = started();
  REQUIRE(std::holds_alternative<rw::watch>(watching.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now())));
  CHECK(std::holds_alternative<rw::connect>(watching.resume(rw::changed{cut_off()}, now())));
  CHECK(std::holds_alternative<rw::list>(watching.resume(rw::connected{}, now())));
}

TEST_CASE("a busy server (throttled_op): it asks again after the pause connect{after} says") {
  auto fsm = started();
  auto next = fsm.resume(rw::listed{make_error_code(zk_error::throttled_op)}, now());
  REQUIRE(std::holds_alternative<rw::connect>(next));
  CHECK(std::get<rw::connect>(next).after == zk_error::throttled_op);
}

TEST_CASE("the session expired: its leases went with it (session_expired), whichever step learns it") {
  // The listing answered in the next session.
  auto listed_later = started();
  CHECK(failure<rw>(listed_later.resume(rw::listed{{}, {mine}, 1}, later_session())) == zk_error::session_expired);
  // A connection lost as it expired: no riding through into the next one.
  auto cut_later = started();
  CHECK(failure<rw>(cut_later.resume(rw::listed{cut_off()}, later_session())) == zk_error::connection_loss);
  // The wait for the connection ends with the expiry.
  auto waiting = started();
  REQUIRE(std::holds_alternative<rw::connect>(waiting.resume(rw::listed{cut_off()}, now())));
  auto expired = make_error_code(zk_error::session_expired);
  CHECK(failure<rw>(waiting.resume(rw::connected{expired}, now())) == expired);
  // A watch that fails as the session expires.
  auto watching = started();
  REQUIRE(std::holds_alternative<rw::watch>(watching.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now())));
  CHECK(failure<rw>(watching.resume(rw::changed{expired}, now())) == expired);
}

TEST_CASE("room on replies too old to be sure of the session: the contact confirmed, then a listing, then granted") {
  auto fsm = started();
  CHECK(std::holds_alternative<rw::confirm>(fsm.resume(rw::listed{{}, {mine}, 1}, now(false))));
  CHECK(std::holds_alternative<rw::list>(fsm.resume(rw::confirmed{}, now())));
  CHECK(std::holds_alternative<rw::granted>(fsm.resume(rw::listed{{}, {mine}, 1}, now())));
  // A confirmation's failure is met by the listing after it.
  auto failed_confirm = started();
  REQUIRE(std::holds_alternative<rw::confirm>(failed_confirm.resume(rw::listed{{}, {mine}, 1}, now(false))));
  CHECK(std::holds_alternative<rw::list>(failed_confirm.resume(rw::confirmed{cut_off()}, now())));
  // No grant can ever be sure: why, at once.
  auto never = started();
  rw::look unsure{generation, false, make_error_code(error::invalid_safety_margin), false};
  CHECK(failure<rw>(never.resume(rw::listed{{}, {mine}, 1}, unsure)) == error::invalid_safety_margin);
}

TEST_CASE("the semaphore's mutex lost: the wait ends with lock_lost, at every step but a listing with room") {
  // While watching.
  auto watching = started();
  REQUIRE(std::holds_alternative<rw::watch>(watching.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now())));
  CHECK(failure<rw>(watching.resume(rw::mutex_lost{}, now())) == error::lock_lost);
  // While a listing was in flight that shows no room: it does not watch.
  auto no_room = started();
  CHECK(failure<rw>(no_room.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now(true, true))) == error::lock_lost);
  // While a listing was in flight that shows room: granted (the count is right).
  auto room = started();
  CHECK(std::holds_alternative<rw::granted>(room.resume(rw::listed{{}, {mine}, 1}, now(true, true))));
  // While waiting for the connection, or for the contact's confirmation: before it lists again.
  auto connecting = started();
  REQUIRE(std::holds_alternative<rw::connect>(connecting.resume(rw::listed{cut_off()}, now())));
  CHECK(failure<rw>(connecting.resume(rw::connected{}, now(true, true))) == error::lock_lost);
  auto confirming = started();
  REQUIRE(std::holds_alternative<rw::confirm>(confirming.resume(rw::listed{{}, {mine}, 1}, now(false))));
  CHECK(failure<rw>(confirming.resume(rw::confirmed{}, now(true, true))) == error::lock_lost);
  // Lost before it started: it never lists.
  rw before({.names = {mine}, .generation = generation, .max = 2});
  CHECK(failure<rw>(before.start(now(true, true))) == error::lock_lost);
}

TEST_CASE("an event the last action did not ask for is the runner's broken promise: internal_error") {
  auto fsm = started();
  CHECK(failure<rw>(fsm.resume(rw::changed{}, now())) == error::internal_error);
  CHECK(failure<rw>(fsm.resume(rw::listed{{}, {mine}, 1}, now())) == error::internal_error);  // finished
  auto watching = started();
  REQUIRE(std::holds_alternative<rw::watch>(watching.resume(rw::listed{{}, {lease_a, lease_b, mine}, 9}, now())));
  CHECK(failure<rw>(watching.resume(rw::confirmed{}, now())) == error::internal_error);
}
