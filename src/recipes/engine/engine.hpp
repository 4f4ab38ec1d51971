// The contender engine's state (src only, not installed): the engine, a hold
// and its grants, an acquire's attempt, and the small helpers more than one
// part uses. The engine is described in zkasio/detail/lock_engine.hpp. Its
// parts, a file each (those that others call declare it in a header of the
// same name, so each file includes only what it uses):
//   engine.cpp          the engine object: its strand, its making, its session's end told
//   engine_nodes.cpp    a contender's node: created (with parents), listed, found after a
//                       lost reply, deleted
//   engine_hold.cpp     a granted node: its monitor (the lost signal), its grants, its release,
//                       and a mutex's in-process handoff (mutex_options::local_handoff)
//   engine_acquire.cpp  what every acquire does around its I/O: reentry, cancellation,
//                       the removal of its nodes, queueing again after an expiry
//   acquire_runner.cpp  the runner of the acquire's state machines (acquire_flow.cpp
//                       around fair_acquire.cpp or race_acquire.cpp): every lock recipe's
//                       acquire (start_acquire); what the runners share is machine_run.hpp
//   engine_leases.cpp   the semaphore's leases (decided by lease_acquire.cpp and, its wait
//                       for room, room_wait.cpp: state machines without I/O)
//   race_run.cpp        the runner of the race recipes' attempts (race_mutex, election's
//                       race mode), decided by race_acquire.cpp, and their cleanup
//   engine_leader.cpp   who leads, the queue as seen from outside, revocation
//   lock.cpp            the lock object and owner
// and, beside them, in the folders beside engine/: the rules without I/O
// (rules/: queue_rule.cpp, each recipe's rule, and lock_queue.cpp, node
// names; decisions.hpp, what the machines share), the state machines
// (machines/: acquire_flow, fair_acquire, lease_acquire, room_wait,
// race_acquire, and hold_watch, the holder's monitor's decisions), and what
// a process knows across its lock objects (process_wide/: known_nodes,
// local_turns).
// The parts call one another without cycles: engine_nodes calls none of
// the others; engine_hold calls engine_nodes; engine_acquire both; the
// runners (acquire_runner with race_run, engine_leases) and engine_leader
// call those, never the reverse; lock.cpp (the lock object) gives a grant
// back through engine_hold.
#pragma once

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/version.hpp>
// as_tuple left experimental in Asio 1.24 (Boost 1.80); the old name is gone
// from newer Asio.
#if defined(ZKASIO_BOOST_ASIO) || ASIO_VERSION >= 102400
#include <asio/as_tuple.hpp>
namespace zkasio::detail {
using asio::as_tuple;
}
#else
#include <asio/experimental/as_tuple.hpp>
namespace zkasio::detail {
using asio::experimental::as_tuple;
}
#endif
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <deque>
#include <list>
#include <span>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>

#include "recipes/rules/busy_backoff.hpp"
#include "recipes/rules/decisions.hpp"
#include "recipes/process_wide/known_nodes.hpp"
#include "recipes/machines/hold_watch.hpp"
#include "recipes/process_wide/local_turns.hpp"
#include "recipes/rules/lock_queue.hpp"
#include "recipes/rules/queue_rule.hpp"
#include "recipes/engine/strand_latch.hpp"

namespace zkasio::detail {

using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;

// The error code an exception stands for: a system_error's own, else
// error::internal_error (never a ZooKeeper code).
inline error_code code_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const system_error& x) {
    return x.code();
  } catch (...) {
    return make_error_code(error::internal_error);
  }
}

// Runs `work` (a coroutine that reports errors in its result, never by
// throwing) on `strand` as the operation of `done`. A cancellation of `done`
// (which completes it at once) reaches the coroutine as terminal, which
// ends in the background; an exception completes it with code_of's code.
template <class... Values>
void start_spawned(const lock_strand& strand, awaitable<std::tuple<error_code, Values...>> work,
                   completion_ptr<Values...> done) {
  asio::dispatch(strand, [strand, work = std::move(work), done = std::move(done)]() mutable {
    if (done->done()) return;  // cancelled before it started
    auto stop = std::make_shared<asio::cancellation_signal>();
    // (Cleared when `done` completes. A cancellation between the coroutine's
    // end and its posted completion emits into co_spawn's state, kept in
    // `stop`, with nothing bound: harmless.)
    done->on_cancel = [stop] { stop->emit(asio::cancellation_type::terminal); };
    asio::co_spawn(strand, std::move(work),
                   asio::bind_cancellation_slot(stop->slot(), [done, stop](std::exception_ptr e,
                                                                           std::tuple<error_code, Values...> result) {
                     if (e) std::get<0>(result) = code_of(e);
                     std::apply([&](error_code ec, auto&&... values) { done->complete(ec, std::move(values)...); },
                                std::move(result));
                   }));
  });
}

// Tells the lock object's observer (lock_options::observer), if it has one.
// On the strand.
inline void report(const mutex_options& options, std::string_view path, lock_event::kind what, std::string_view node,
                   std::chrono::steady_clock::duration took, error_code ec = {}) noexcept {
  if (!options.observer) return;
  try {
    options.observer(lock_event{what, path, node, took, ec});
  } catch (...) {  // (documented: dropped)
  }
}

// Curator's revocation request, written into the holder's node.
constexpr std::string_view revoke_message = "__REVOKE__";

struct listing_round;

struct hold;

// The lead of its lock object's local run (local_handoff), held by an
// acquire: given to its hold once the acquire completes with the lock
// (hand_to), else passed on to the next waiter when dropped, however the
// acquire ends (an exception too). Empty: no lead.
class run_lead {
 public:
  run_lead() = default;
  explicit run_lead(std::shared_ptr<engine_state> m) : m_(std::move(m)) {}
  run_lead(run_lead&& other) noexcept : m_(std::move(other.m_)) {}
  run_lead& operator=(run_lead&& other) noexcept;
  ~run_lead();
  bool leads() const { return m_ != nullptr; }
  // `held`, the acquire's lock, leads the run from now on (unless it may be
  // lost already: then the lead goes on).
  void hand_to(const lock& held);
  // The lead of `m`'s run that `h`, a lock handed over in memory (`handed`)
  // that may be lost or whose session has ended, led (acquire_flow). Its hold
  // leaves the run, so that dropping it deletes its node without handing it
  // on. (None if the hold no longer leads: never two leads.)
  static run_lead taken_from(std::shared_ptr<engine_state> m, hold& h, lock handed);

 private:
  std::shared_ptr<engine_state> m_;
};

// What a contender waiting in a local run (below) is given: the lock handed
// over in memory, or the lead (queue a node for the run). Whatever ends the
// waiter, neither is dropped: a lock handed over goes back when destroyed
// (to the next waiter), and so does a lead (run_lead): a deadline that
// fires in the tick the lead is handed over ends the wait, not the run.
struct run_ticket {
  lock handed;
  std::weak_ptr<hold> handed_hold;  // the lock handed's (its session, whether it is sure)
  run_lead lead;
};

// A mutex's in-process handoff (mutex_options::local_handoff, engine_hold.cpp).
// A run is the lock object's contenders behind one leader: the leader's
// acquire queues a node as any acquire does; once its acquire completes with
// the lock (not when granted: a lock granted as the deadline struck is
// dropped there and its node deleted), that hold leads the run
// (hold::in_run) and, at its release, hands the lock to the
// next of `waiting` in memory (next_after_release) or deletes its node and
// passes the lead to the next, whose acquire queues a node of its own
// (behind the old node while that is not deleted yet: for a while the object
// may have two). Every other acquire on the lock object waits here
// meanwhile. On the strand.
struct local_run {
  struct waiter {
    completion_ptr<> done;
    std::optional<owner> who;
    std::shared_ptr<run_ticket> ticket;
  };
  bool active = false;  // someone leads: an acquire, or a hold
  std::deque<waiter> waiting;
};

struct engine_state {
  engine_state(session& owner, std::string path, mutex_options options, queue_family family,
               std::optional<lock_strand> shared_strand)
      : s(session_access::view(owner)), core(session_access::core(owner)), path(std::move(path)), options(std::move(options)), family(family),
        strand(shared_strand ? *shared_strand : make_strand_over(s.get_executor())),
        known(known_nodes::of(s.hosts(), this->path)),
        turns(family == queue_family::race ? local_turns::of(s.hosts(), this->path) : nullptr) {}
  session s;  // a view: what outlives the user's session object gets session_closed
  // The session's core, named while the session object lived: the key of its
  // lines in known_nodes and local_turns (session_in), which must still match
  // when the session ends by the object's destruction (core(s) is null then).
  std::weak_ptr<const session_core> core;
  std::string path;
  mutex_options options;  // (every recipe's are a mutex's: the fields of all)
  queue_family family;  // the recipe's node kinds
  bool own_node = false;  // a node of the user's own recipe (async_hold_node): it may be left (async_leave)
  lock_strand strand;
  std::vector<std::weak_ptr<hold>> holds;  // live holds, for reentrancy by owner
  std::shared_ptr<known_nodes> known;
  std::shared_ptr<local_turns> turns;  // the race recipes' (see local_turns.hpp)
  local_run run;  // with options.local_handoff only
  std::shared_ptr<listing_round> next_listing;  // not sent yet: contenders may join it
  bool listing_in_flight = false;  // sent, not answered (see fresh_listing)
  busy_backoff busy;  // the pause before asking a busy server again (until_retry)
  // Withdraws report_session_end's wait (emitted on the strand).
  std::shared_ptr<asio::cancellation_signal> stop_reporting = std::make_shared<asio::cancellation_signal>();

  ~engine_state() {
    asio::dispatch(strand, [stop = stop_reporting] { stop->emit(asio::cancellation_type::terminal); });
  }

  // A contender's node by its name under the path; "": the race recipes'
  // node, which is the path itself.
  std::string full(std::string_view name) const {
    if (name.empty()) return path;
    std::string node;  // (one allocation: this is on every request's way)
    node.reserve(path.size() + 1 + name.size());
    node.append(path).append(1, '/').append(name);
    return node;  // (not append's reference: that would be copied)
  }
  session_ref session_in(std::uint64_t generation) const {
    return {core, generation};
  }
};

// A listing of the lock's children shared by the contenders that asked for
// one before it was sent.
struct listing_round {
  explicit listing_round(const lock_strand& strand) : ready(strand) {}
  strand_latch ready;  // set when the reply is in
  error_code ec;
  std::shared_ptr<const queue_view> view;
};

// A node held, shared by the grants of one owner (reentrancy). Touched on the
// mutex's strand, but for the flags that observers read from any thread.
struct hold {
  std::shared_ptr<engine_state> engine;
  std::string name;  // under the lock path
  std::string node;  // full path
  node_kind kind = node_kind::lock;
  std::int64_t czxid = 0;
  // The fencing token of its grants: the node's czxid, but a downgrade's,
  // which keeps its write grant's (its node is newer than the write node
  // of a writer queued behind, whose grant comes after it).
  std::int64_t token = 0;
  std::int32_t version = 0;
  std::int64_t owner_id = 0;  // the node's ephemeral owner
  std::optional<owner> who;
  int grants = 0;  // lock objects holding it
  std::vector<std::weak_ptr<grant>> grant_list;
  std::atomic<bool> released{false};
  std::atomic<bool> lost{false};
  completion_ptr<> releasing;  // the release waiting for its delete (give_back), if any
  asio::cancellation_signal stop_monitor;
  std::shared_ptr<local_turns::turn> turn;  // a race hold's, until its node is deleted
  // The in-process handoff: the hold leads its engine's local run (until its
  // node goes or it may be lost), was handed over `local_count` times, and
  // how far the rule lets it go on (see next_after_release).
  bool in_run = false;
  // Its lock sits in a waiter's ticket (hand_off), not yet taken: a loss then
  // leaves the lead with it, for the waiter to take (run_lead::taken_from) or
  // to pass on, lest the run have two leads.
  bool handing = false;
  std::uint64_t generation = 0;  // of the session that created the node (what the monitor watches)
  std::uint64_t local_count = 0;
  local_run_budget budget;
};

// One lock object's share of a hold: its own lost signal.
// Its share of the hold is given back when released, or else when it is
// destroyed (its lock object dropped).
struct grant {
  std::shared_ptr<hold> held;
  std::uint64_t local = 0;  // the hold's local_count at this grant (fence_token::local)
  std::chrono::steady_clock::time_point granted_at = std::chrono::steady_clock::now();  // (lock_event's took)
  asio::cancellation_signal lost_signal;
  // lost_slot()'s after the loss: each emitted once its caller has bound it,
  // then dropped once nothing is bound to it any more. On the strand.
  struct late_signal {
    asio::cancellation_signal signal;
    bool emitted = false;
  };
  std::list<late_signal> late_signals;
  std::vector<completion_ptr<>> lost_waiters;  // async_wait_lost's; on the strand
  bool given_back = false;  // on the strand
  ~grant();
  // Completes every async_wait_lost with `ec`. On the strand.
  void end_lost_waits(error_code ec) {
    for (auto& done : std::exchange(lost_waiters, {})) done->complete(ec);
  }
};

// Tells the observer how an acquire begun at `started` ended: failed with
// `ec`, or granted each of `held` (a semaphore's acquire may give several).
inline void report_outcome(const engine_state& m, std::chrono::steady_clock::time_point started, error_code ec,
                           std::span<const lock> held) noexcept {
  auto took = std::chrono::steady_clock::now() - started;
  if (ec) return report(m.options, m.path, lock_event::kind::failed, {}, took, ec);
  for (auto& one : held) report(m.options, m.path, lock_event::kind::granted, one.node(), took);
}

// Tells a hold's observer what became of one of its grants (lost, released),
// with how long that grant held it.
inline void report_grant(const hold& h, std::chrono::steady_clock::time_point granted_at, lock_event::kind what) noexcept {
  report(h.engine->options, h.engine->path, what, h.node, std::chrono::steady_clock::now() - granted_at);
}

// Runs `work` on `strand` to its end whatever happens to whoever waits for it
// (a delete must go on when its caller gives up). Started at once.
template <class T>
class background {
 public:
  background(const lock_strand& strand, awaitable<T> work)
      : shared_(std::make_shared<outcome>(strand)) {
    asio::co_spawn(
        strand,
        [](awaitable<T> work, std::shared_ptr<outcome> o) -> awaitable<void> {
          o->result = co_await std::move(work);
          o->finished.set();
        }(std::move(work), shared_),
        asio::detached);
  }
  // Its result; nullopt when this wait was cancelled first.
  awaitable<std::optional<T>> wait() {
    auto o = shared_;
    co_await o->finished.async_wait(as_tuple(use_awaitable));
    co_return o->result;
  }

 private:
  struct outcome {
    explicit outcome(const lock_strand& strand) : finished(strand) {}
    strand_latch finished;
    std::optional<T> result;
  };
  std::shared_ptr<outcome> shared_;
};

// A create's outcome, filled in by its completion. Shared: a cancelled
// acquire may be gone before the reply comes.
struct create_reply {
  bool done = false;
  bool abandoned = false;  // its acquire ended first: the node is not adopted (its cleanup deletes it)
  error_code ec;
  lock_node node;
  node_stat stat;
};

// What an acquire knows of its node.
struct attempt {
  node_kind kind = node_kind::lock;
  // A downgrade (a write holder's read lock): the node takes the write node's
  // sequence (a plain ephemeral create) so that no writer queued behind the
  // write lock can pass the read lock; the write node does not block it.
  std::optional<std::string> downgrade_of{};  // the write node's name
  std::int64_t downgrade_token = 0;          // the write grant's fencing token
  uuid_text uuid{};
  std::string data{};  // written into the node
  // A try's: one look, so a lost connection ends it (ride_through) where an
  // acquire waits for the connection. Its cleanup rides through all the same.
  bool one_look = false;
  std::uint64_t generation = 0;  // of the session when the create was sent
  bool submitted = false;        // a create may have taken effect
  bool gone = false;             // the node is known to be gone
  lock_node node;                // once known
  node_stat stat;                // its ephemeral_owner tells whose it is
  std::shared_ptr<create_reply> reply{};  // of the latest create
  std::shared_ptr<local_turns::turn> turn{};  // a race contender's (see local_turns.hpp)
  // A race contender's session id in `generation`: a node it owns is this
  // attempt's (with the turn). Not s.id() read later: a reply may be
  // answered after the session expired and the next one began, whose own
  // contender's node is not this attempt's. (Fair nodes carry their uuid.)
  std::int64_t session_id = 0;
};

using listing = std::tuple<error_code, std::shared_ptr<const queue_view>>;

// Why an acquire's deadline passed: the lock was busy (lock_timeout), or
// no server was connected then (not_connected): a program, and zklock's
// exit status, tell "held by another" from "unreachable".
inline error_code deadline_passed(const session& s) {
  return make_error_code(s.state() == session_state::connected ? error::lock_timeout : error::not_connected);
}

// Whether the session waits for a server now (connecting, disconnected, or
// a new session after an expiry), as opposed to connected or ended for good.
inline bool awaiting_server(const session& s) {
  auto state = s.state();
  return state == session_state::connecting || state == session_state::suspended || state == session_state::expired;
}

}  // namespace zkasio::detail
