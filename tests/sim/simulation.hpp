// A deterministic simulation of the fair queue's contenders (the state
// machine of src/recipes/machines/fair_acquire.hpp, the real code), of the race
// recipes' (src/recipes/machines/race_acquire.hpp), of a local_mutex's
// (acquire_flow.hpp) or a semaphore's (lease_acquire.hpp, room_wait.hpp),
// against a small model of a ZooKeeper server, driven by a seeded random
// schedule.
//
// The model: one lock path; EPHEMERAL_SEQUENTIAL nodes with czxids; sessions
// with ids, a connection that drops and comes back, and expiry (which
// deletes the session's nodes and its watches); deletion watches; replies
// and events delivered to each session in the order of the server's changes
// (FIFO per session); requests submitted while disconnected wait for the
// connection; a connection lost drops the replies in flight (the server
// applied the requests: a lost create reply), but not those the client has
// read off it and the process has not yet run: they are read as they were,
// after a cut, an expiry, even the next session's connection (a process
// paused past its session's timeout reads them on waking); an operator's
// delete of any node. The contenders of one process share what it knows of its nodes
// (known_nodes' rules) and wait for a node of their own session in the
// process. The harness plays the runner: it carries each action out on the
// model, feeds the reply back in, stops contenders at random (a deadline, a
// cancellation: their node is removed), releases the holders after a while.
//
// The race recipes: one EPHEMERAL node at the lock path, made by whoever
// is first (node_exists for the others), watched for its deletion; the
// harness plays race_run (race_run.cpp): the contenders of one session
// take turns (local_turns: a line per session and generation, which ends
// with its session), and an attempt that sent a create, stopped or
// failed, removes the node if its session's and only then passes its turn
// on, as a holder's release does (that incarnation only): request by
// request, as the runner makes them (exists, then a delete by path, which
// an operator's delete and another session's create in between escape).
// The path's parent is always there (make_parents is never asked).
//
// The local_mutex: a mutex whose lock objects (one a session) hand the lock
// over in memory (acquire_flow.hpp around fair_acquire's attempts). The
// harness plays acquire_op (acquire_runner.cpp): the run's lead taken when
// idle, else a wait in its line; a stop leaves the line, drops the lead;
// and, at a release, engine_hold.cpp's hand_off (next_after_release: the
// lock to the next waiter, its node kept) or the node deleted and the lead
// passed on. What is handed over reaches its waiter a step later, when it
// may have stopped: its flow then says pass_on, and it goes on.
//
// The semaphore (of N leases, 2..4 by the seed; each contender asks for
// 1..N): lease_acquire around fair_acquire's attempts (the semaphore's
// mutex, then each lease node, create_only) and room_wait. The leases'
// nodes are a second path's children (listed apart; a cversion, children
// watches that fire on any change of them); the harness plays
// engine_leases.cpp: the mutex released once the attempt ends, a failed
// attempt's leases deleted whenever lease_acquire leaves the attempt, and the
// mutex's loss (its node deleted, its session expired) latched for
// room_wait's look and told to a wait that watches.
//
// After every step it checks the guarantees: a contender is granted only
// when its node is on the server, of its session, with no node ahead of it
// that blocks it (a writer alone, readers beside readers; one holder of a
// mutex, one leader of an election); the fencing
// tokens of successive grants increase; nobody is granted after its node was
// deleted; no grant is of a node of a session that has ended (which the
// process knows, unlike an operator's delete); a race grant is of the node
// its own attempt made in its session;
// no attempt is fed an event its machine does not wait for; a local run's
// tokens (its node's czxid, then the hand-overs) increase in grant order;
// and at the end, once the faults stop, every contender has ended (none
// hangs), no node is left but the holders', which release, and no lock
// object's run is led by nobody (a fresh acquire leads it); a semaphore's
// leases held on the server are at most N, a grant's leases were on the
// server in its session, its mutex has one holder on the server, and at
// most one wait for room watches unaware that its mutex is lost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkasio::sim {

struct options {
  int contenders = 6;       // over `sessions` sessions of one process
  int sessions = 3;
  int rounds = 2;           // acquisitions each contender makes
  int fault_steps = 400;    // steps during which faults happen; then the run drains
  int max_steps = 20000;    // a run not done by then hangs
  // The recipe its contenders queue in: a shared_mutex's readers and
  // writers, a mutex, or a fair election's candidates (granted only once
  // their node is seen owned by their session: Curator's CURATOR-696); or
  // they race for the one node at the path (race_acquire.hpp): a
  // race_mutex's contenders (a third of them only try) or a race-mode
  // election's candidates.
  // Or a local_mutex: a mutex whose lock objects (one a session) hand the
  // lock over in memory (acquire_flow.hpp's local run).
  // Or a semaphore's contenders asking for 1..N leases (N: 2..4, by the seed).
  enum class recipe { shared_mutex, mutex, election, race_mutex, race_election, local_mutex, semaphore } queue =
      recipe::shared_mutex;
  // A planted fault, to show the checks catch one: the harness answers the
  // check of a waiter's own node with "there" whatever the server says (a
  // grant without the own-node check); in a race, the look-up of the node
  // at the path with "ours" (a lost create's reply taken for a win); for a
  // local_mutex, what a flow that stopped says to pass on (the lock or the
  // lead handed to it) dropped.
  bool plant_skip_own_check = false;
  bool trace = false;  // every step, in the result (for a replay)
};

struct result {
  bool ok = true;
  std::string failure;  // what broke, and at which step
  std::string trace;    // with options::trace: every step
  std::uint64_t steps = 0, grants = 0, faults = 0, stopped = 0;
};

result run(std::uint64_t seed, const options& o = {});

// A recipe by its name ("shared_mutex", "mutex", "election"), and its name.
std::optional<options::recipe> recipe_named(std::string_view name);
std::string_view name_of(options::recipe queue);

}  // namespace zkasio::sim
