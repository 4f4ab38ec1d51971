#include "sim/simulation.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <variant>
#include <vector>
#include <zkasio/error.hpp>

#include "recipes/machines/acquire_flow.hpp"
#include "recipes/rules/decisions.hpp"
#include "recipes/machines/fair_acquire.hpp"
#include "recipes/machines/lease_acquire.hpp"
#include "recipes/machines/race_acquire.hpp"
#include "recipes/machines/room_wait.hpp"

namespace zkasio::sim {

namespace {

using namespace zkasio::detail;
using fa = fair_acquire;
using ra = race_acquire;
using af = acquire_flow;
using la = lease_acquire;
using rw = room_wait;
// What the model delivers to a contender: its recipe's machine's event (a
// local_mutex's acquire_flow waits for the connection, its attempts are
// fair_acquire's; so are a semaphore's mutex and lease nodes, and its wait
// for room is room_wait's).
using event = std::variant<fa::event, ra::event, af::event, rw::event>;

// The race recipes' node: the lock path itself.
const std::string race_path = "/lock";

// A node on the model server.
struct server_node {
  lock_node node;
  std::int64_t czxid = 0;
  std::int64_t owner = 0;  // session id
};

// What a session of the model holds: its id on the server, its generation
// (a new session after an expiry), its connection, and what it has to
// deliver to its contenders in the order the server made it.
struct delivery {
  int contender;
  std::uint32_t run;  // the contender's attempt it answers
  sim::event event;
  // A reply's same answer as a failure (the connection lost before it came,
  // the session expired); none for a watch's event, which waits on.
  std::function<sim::event(zkasio::error_code)> failed;
  // Delivered while disconnected too: a failure, or a wake-up in the process.
  bool now = false;
  // A create's reply: the listing sent after it (made into a view when
  // delivered, after the create's completion adopted the node).
  std::vector<lock_node> listing{};
  std::uint64_t produced_at = 0;  // the server's step when it made the answer
  std::uint64_t generation = 0;   // the session's when it made the answer
  bool answer = false;  // a reply to the request pending (not a watch's event)
  // Instead of a contender's event, the reply to a request of the runner's
  // own (a race cleanup's): what it does, told the reply's error
  // (`runner_ec`: connection_loss once a cut lost it).
  std::function<void(zkasio::error_code)> to_runner{};
  zkasio::error_code runner_ec{};
};

struct session_model {
  std::int64_t id = 0;
  std::uint64_t generation = 0;
  bool connected = true;
  bool expired = false;  // on the server; the client learns it when it connects again
  std::uint64_t connections = 1;
  std::deque<delivery> inbox;
  std::vector<std::function<void()>> parked;  // submitted while disconnected
};

// A session's line at the race node in the process (local_turns): keyed by
// the session and its generation.
using line_key = std::pair<int, std::uint64_t>;

// A local_mutex's node held by its lock object's run (engine.hpp's hold):
// handed from holder to holder in memory, each hand-over counted.
struct run_hold {
  int session = 0;  // its lock object's
  std::string name;
  std::int64_t czxid = 0;
  std::int64_t owner = 0;
  std::uint64_t generation = 0;
  std::uint64_t handed = 0;  // hand-overs so far: the token's second part
  bool in_run = false;       // leads the run (its release hands the lock on)
};

// A lock object's local run (engine.hpp's local_run): whether someone
// leads it, and who waits in its line (with the flow that waits).
struct local_run_model {
  bool active = false;
  std::deque<std::pair<int, std::shared_ptr<af>>> waiting;
};

// A contender as the harness runs it: its state machine, what it holds.
struct contender_model {
  int session = 0;
  node_kind kind = node_kind::lock;
  std::optional<fa> fsm;     // a fair recipe's machine,
  std::optional<ra> race;    // or a race recipe's
  bool tries = false;        // a try_acquire each round (one look)
  bool resting = false;      // a try between rounds: its next begins at a later step
  std::uint32_t run = 0;
  int rounds_left = 0;
  bool holding = false;
  int hold_steps = 0;
  std::string held_node;
  std::int64_t held_czxid = 0;
  node_kind held_kind = node_kind::lock;  // (a downgrade's: read, of a writer)
  // A shared_mutex writer that downgrades every other write lock: the write
  // lock kept while its downgrade (a read node taking the write node's
  // sequence) is acquired, released once that ends either way.
  bool downgrades = false;
  struct kept_write {
    std::string name;
    std::int64_t czxid = 0;
    std::uint64_t generation = 0;
  };
  std::optional<kept_write> downgrading;
  bool downgrade_next = false;
  bool waiting_here = false;  // in this process, for a node of its session
  // A race attempt's turn in its session's line (0: none; its hold keeps
  // it until the release's delete), and whether it sent a create.
  line_key line{};
  std::uint64_t turn = 0;
  bool submitted = false;
  // A local_mutex's acquire around its attempts (shared with what the
  // local run hands it: a hand-over may reach it after it stopped); whether
  // it leads its lock object's run; the run's hold it was handed, until it
  // takes it; the hold it has (its lock object's node).
  std::shared_ptr<af> flow;
  bool leads = false;
  std::shared_ptr<run_hold> handed, run_held;
  // A semaphore's acquire of `leases` (lease_acquire), its wait for room;
  // the semaphore's mutex while an attempt holds it (its node, that
  // session's generation), whether that may be lost (the latch room_wait
  // looks at), whether its room_wait watches (only then is it told so);
  // its attempt's lease nodes, by name with their czxids.
  std::optional<la> lease_fsm;
  std::optional<rw> room;
  std::size_t leases = 0;
  std::optional<std::pair<std::string, std::uint64_t>> guard;
  std::int64_t guard_czxid = 0;
  bool mutex_lost = false, room_watching = false;
  struct lease_node {
    std::string name;
    std::int64_t czxid = 0;
    std::uint64_t generation = 0;  // of the session that made it
  };
  std::vector<lease_node> mine;
  // How its pending request at the server fails (its session expired).
  std::function<sim::event(zkasio::error_code)> pending_failed;
  std::uint64_t decided_at = 0;  // the server's step of the answer it last acted on
  std::string last_action;       // (for a hang's report)
};

struct known_entry {
  node_kind kind;
  int session;
  std::uint64_t generation;
};

queue_family family_of(options::recipe queue) {
  switch (queue) {
    case options::recipe::mutex:
    case options::recipe::local_mutex:
    case options::recipe::semaphore: return queue_family::mutex;  // (its mutex's; its leases' listed apart)
    case options::recipe::election: return queue_family::election;
    case options::recipe::race_mutex:
    case options::recipe::race_election: return queue_family::race;
    case options::recipe::shared_mutex: break;
  }
  return queue_family::read_write;
}

// Contender i's node kind: a third of a shared_mutex's contenders read.
node_kind kind_of(options::recipe queue, int i) {
  switch (queue) {
    case options::recipe::mutex:
    case options::recipe::local_mutex:
    case options::recipe::semaphore:
    case options::recipe::race_mutex:
    case options::recipe::race_election: return node_kind::lock;
    case options::recipe::election: return node_kind::latch;
    case options::recipe::shared_mutex: break;
  }
  return i % 3 == 1 ? node_kind::read : node_kind::write;
}

// Whether contender i only tries (one look: lock_busy at once): a third of a
// race_mutex's and of a semaphore's (its mutex, its leases and its wait for
// room each one look, as try_acquire makes them); an election's candidates
// campaign.
bool tries(options::recipe queue, int i) {
  return (queue == options::recipe::race_mutex || queue == options::recipe::semaphore) && i % 3 == 1;
}

bool is_race(options::recipe queue) {
  return queue == options::recipe::race_mutex || queue == options::recipe::race_election;
}

// Whether a contender still acquires (a local_mutex's: its flow).
bool acquiring(const contender_model& c) {
  if (c.flow) return !c.flow->finished();
  if (c.lease_fsm) return !c.lease_fsm->finished();
  return (c.fsm && !c.fsm->finished()) || (c.race && !c.race->finished());
}

// Whether the machine `e` is for still waits: a reply to an attempt over
// is dropped.
bool waits_for(const contender_model& c, const sim::event& e) {
  if (std::holds_alternative<fa::event>(e)) return c.fsm && !c.fsm->finished();
  if (std::holds_alternative<ra::event>(e)) return c.race && !c.race->finished();
  if (auto* room = std::get_if<rw::event>(&e))
    return c.room && !c.room->finished() && (c.room_watching || !std::holds_alternative<rw::mutex_lost>(*room));
  return c.flow && !c.flow->finished();
}

class simulation final : public acquire_world {
 public:
  simulation(std::uint64_t seed, const options& o) : random_(seed), o_(o) {
    if (o.queue == options::recipe::semaphore) semaphore_size_ = 2 + pick(3);
    for (int i = 0; i < o.sessions; ++i) {
      sessions_.emplace_back();
      sessions_.back().id = next_session_id_++;
    }
    for (int i = 0; i < o.contenders; ++i) {
      contender_model c;
      c.session = i % o.sessions;
      c.kind = kind_of(o.queue, i);
      c.downgrades = o.queue == options::recipe::shared_mutex && i % 3 == 2;
      c.tries = tries(o.queue, i);
      c.rounds_left = o.rounds;
      if (o.queue == options::recipe::semaphore) c.leases = 1 + pick(semaphore_size_);
      contenders_.push_back(std::move(c));
    }
  }

  result go() {
    for (int i = 0; i < o_.contenders; ++i) begin(i);
    for (; r_.steps < static_cast<std::uint64_t>(o_.max_steps) && r_.ok; ++r_.steps) {
      bool faults = r_.steps < static_cast<std::uint64_t>(o_.fault_steps);
      if (done()) break;
      check_holders();
      if (!step(faults)) {
        if (!faults) fail("nothing can wake the contenders still waiting (a hang):" + waiting());
      }
    }
    if (r_.ok && !done()) fail("the run did not end within " + std::to_string(o_.max_steps) + " steps (a hang):" + waiting());
    if (r_.ok) {
      for (auto& [name, n] : server_) fail("node " + name + " left on the server");
      // Everyone done, a fresh acquire must find the run idle to lead it.
      for (auto& [object, run] : runs_)
        if (run.active) fail("the lock object of s" + std::to_string(object) + " is wedged: its run is led by nobody");
    }
    return r_;
  }

  // ------------------------------------------------------------- the world
  std::uint64_t generation() const override { return sessions_[at().session].generation; }
  std::int64_t session_id() const override { return sessions_[at().session].id; }
  bool connected() const override { return sessions_[at().session].connected; }
  std::uint64_t connection() const override { return sessions_[at().session].connections; }
  bool awaiting_server() const override { return !sessions_[at().session].connected; }
  bool sure() const override { return true; }
  zkasio::error_code never_sure() const override { return {}; }
  bool here(std::string_view name, std::uint64_t gen) const override {
    auto it = known_.find(std::string(name));
    return it != known_.end() && it->second.session == at().session && it->second.generation == gen;
  }
  below_result below(const lock_node& mine, std::string_view exempt) override {
    // Down from mine (sequences are not wrapped here), dropping entries of
    // sessions over; a node of a session not connected lists again.
    std::vector<std::pair<sequence_number, std::string>> before;
    for (auto& [name, e] : known_)
      if (auto n = parse_lock_node(name); n && n->sequence < mine.sequence) before.emplace_back(n->sequence, name);
    std::sort(before.rbegin(), before.rend());
    for (auto& [seq, name] : before) {
      auto& e = known_.at(name);
      if (sessions_[e.session].generation != e.generation) {
        forget(name);
        continue;
      }
      if (!queue_rule::of(mine.kind).in_queue(e.kind) || !queue_rule::of(mine.kind).blocks(mine.kind, e.kind) ||
          name == exempt)
        continue;
      if (!sessions_[e.session].connected) return {below_result::relist, name};
      return {below_result::node, name};
    }
    return {};
  }
  void gone(std::string_view name) override { forget(std::string(name)); }
  void add(const lock_node& node, std::uint64_t gen, std::string_view) override {
    known_[node.name] = {node.kind, at().session, gen};
  }
  std::shared_ptr<const queue_view> view(std::vector<lock_node> prefix) const override {
    return known_view(std::move(prefix));
  }

 private:
  const contender_model& at() const { return contenders_[current_]; }
  // The planted fault of the fair queues' (a local_mutex's is its run's, a
  // semaphore's its wait for room's).
  bool planted_own_check() const {
    auto q = o_.queue;
    return o_.plant_skip_own_check &&
           (q == options::recipe::shared_mutex || q == options::recipe::mutex || q == options::recipe::election);
  }
  template <class T>
  T pick(T n) { return std::uniform_int_distribution<T>(0, n - 1)(random_); }
  bool chance(int percent) { return pick(100) < percent; }

  void note(const std::string& what) {
    if (o_.trace) r_.trace += std::to_string(r_.steps) + " " + what + "\n";
  }
  static const char* name_of(const fa::action& a) {
    static const char* names[] = {"connect", "create_and_list", "list", "sync", "confirm", "look_up", "make_parents", "wait_gone", "keep_waiting", "grant", "fail"};
    return names[a.index()];
  }
  static const char* name_of(const ra::action& a) {
    static const char* names[] = {"connect", "take_turn", "create", "look_up", "sync", "confirm", "remove_own", "watch", "make_parents", "granted", "fail"};
    return names[a.index()];
  }
  static const char* name_of(const la::action& a) {
    static const char* names[] = {"take_mutex", "make_lease", "wait_for_room", "granted", "fail"};
    return names[a.index()];
  }
  static const char* name_of(const rw::action& a) {
    static const char* names[] = {"list", "confirm", "watch", "connect", "granted", "fail"};
    return names[a.index()];
  }
  static const char* name_of(const af::action& a) {
    static const char* names[] = {"attempt", "wait_in_run", "connect", "keep_waiting", "granted_again", "take_handed", "granted", "pass_on", "fail"};
    return names[a.index()];
  }
  static const char* name_of(const sim::event& e) {
    static const char* fair[] = {"connected", "created_and_listed", "listed", "synced", "confirmed", "looked_up", "parents_made", "gone", "own_checked", "own_gone"};
    static const char* race[] = {"connected", "turn_taken", "created", "looked_up", "synced", "confirmed", "removed", "gone", "parents_made"};
    static const char* flow[] = {"handed", "connected", "attempt_ended", "stopped"};
    static const char* room[] = {"listed", "confirmed", "changed", "connected", "mutex_lost"};
    if (auto* f = std::get_if<fa::event>(&e)) return fair[f->index()];
    if (auto* r = std::get_if<ra::event>(&e)) return race[r->index()];
    if (auto* w = std::get_if<rw::event>(&e)) return room[w->index()];
    return flow[std::get<af::event>(e).index()];
  }
  // A race event's error, for the trace.
  static std::string error_in(const sim::event& e) {
    auto* race = std::get_if<ra::event>(&e);
    auto ec = race ? std::visit([](auto& answer) { return answer.ec; }, *race) : zkasio::error_code{};
    return ec ? " " + ec.message() : std::string();
  }

  void fail(std::string what) {
    if (!r_.ok) return;
    r_.ok = false;
    r_.failure = "step " + std::to_string(r_.steps) + ": " + std::move(what);
  }

  // Who still waits, and for what.
  std::string waiting() const {
    std::string who;
    for (std::size_t i = 0; i < contenders_.size(); ++i) {
      auto& c = contenders_[i];
      if (acquiring(c))
        who += " c" + std::to_string(i) + " (s" + std::to_string(c.session) + ", " + c.last_action +
               (c.fsm && !server_.count(c.fsm->node().name) ? ", its node gone" : "") + ")";
    }
    return who;
  }

  bool done() const {
    for (auto& c : contenders_)
      if (c.rounds_left > 0 || c.holding || acquiring(c)) return false;
    for (auto& s : sessions_)
      if (!s.inbox.empty() || !s.parked.empty()) return false;
    return true;
  }

  // ------------------------------------------------------ known nodes' rules
  void forget(std::string name) {  // (by value: callers pass map keys)
    note("known gone: " + name);
    known_.erase(name);
    auto waiting = std::move(local_waiters_[name]);
    local_waiters_.erase(name);
    for (auto [who, run] : waiting) wake(who, run, fa::gone{});
  }

  // --------------------------------------------------------------- server
  // The queue of `kind`'s nodes (a semaphore's leases are listed apart
  // from its mutex's: the model keeps both paths' nodes in one map).
  std::vector<lock_node> listing(node_kind kind) const {
    std::vector<std::string> names;
    for (auto& [name, n] : server_) names.push_back(name);
    return lock_queue(names, kind == node_kind::lease ? queue_family::semaphore : family_of(o_.queue));
  }
  // The node of `who`'s attempt `run` made: its incarnation (czxid)
  // recorded, for the checks.
  node_stat make_node(const std::string& name, lock_node node, int who, std::uint32_t run) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    node_stat st;
    st.czxid = ++zxid_;
    st.ephemeral_owner = sessions_[c.session].id;
    if (node.kind == node_kind::lease) leases_changed();
    server_[name] = {std::move(node), st.czxid, st.ephemeral_owner};
    incarnations_[st.czxid] = {st.ephemeral_owner, who, run};
    note("server: c" + std::to_string(who) + " created " + name);
    return st;
  }
  // The node at `name` as exists answers it.
  std::optional<node_stat> stat_of(const std::string& name) const {
    auto it = server_.find(name);
    if (it == server_.end()) return std::nullopt;
    node_stat st;
    st.czxid = it->second.czxid;
    st.ephemeral_owner = it->second.owner;
    return st;
  }
  void erase_node(std::string name) {  // (by value: callers pass map keys)
    incarnations_[server_.at(name).czxid].deleted_at = r_.steps;
    if (server_.at(name).node.kind == node_kind::lease) leases_changed();
    mutex_gone(name, server_.at(name).czxid);
    server_.erase(name);
    auto range = watches_.equal_range(name);
    std::vector<watch> fired;
    for (auto it = range.first; it != range.second; ++it) fired.push_back(it->second);
    watches_.erase(name);
    for (auto w : fired) {
      auto& c = contenders_[static_cast<std::size_t>(w.who)];
      note("watch of c" + std::to_string(w.who) + " fires on " + name);
      sessions_[c.session].inbox.push_back({w.who, w.run, w.fired, nullptr});
      sessions_[c.session].inbox.back().produced_at = r_.steps;
    }
  }
  // The session's requests: carried out at once when connected, else when
  // it connects again (in order).
  void submit(int session, std::function<void()> request) {
    if (sessions_[session].connected && !sessions_[session].expired) return request();
    sessions_[session].parked.push_back(std::move(request));
  }
  // The reply to `who`'s attempt `run` (the one that asked).
  void reply(int who, std::uint32_t run, sim::event e, std::function<sim::event(zkasio::error_code)> failed) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    auto* fair = std::get_if<fa::event>(&e);
    bool answer = !fair || !std::holds_alternative<fa::own_checked>(*fair);
    sessions_[c.session].inbox.push_back({who, run, std::move(e), std::move(failed)});
    sessions_[c.session].inbox.back().produced_at = r_.steps;
    sessions_[c.session].inbox.back().generation = sessions_[c.session].generation;
    sessions_[c.session].inbox.back().answer = answer;
  }
  // A wake-up in the process of `who`'s attempt `run` (delivered while
  // disconnected too).
  void wake(int who, std::uint32_t run, sim::event e) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    sessions_[c.session].inbox.push_back({who, run, std::move(e), nullptr, true});
    sessions_[c.session].inbox.back().produced_at = r_.steps;
  }

  // --------------------------------------------------------------- running
  void begin(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.rounds_left == 0) return;
    --c.rounds_left;
    ++c.run;
    current_ = who;
    if (is_race(o_.queue)) {
      c.turn = 0;
      c.submitted = false;
      c.race.emplace(c.tries);
      return act(who, c.race->start(race_look(c.session)));
    }
    if (o_.queue == options::recipe::semaphore) {
      c.lease_fsm.emplace(la::request{
          .count = c.leases, .max = semaphore_size_, .try_once = c.tries, .requeue_on_expiry = who % 2 == 0});
      return act(who, c.lease_fsm->start(lease_look(c.session)));
    }
    if (o_.queue == options::recipe::local_mutex) {
      // Half of them queue again after an expiry.
      c.flow = std::make_shared<af>(af::request{.local_run = true, .requeue_on_expiry = who % 2 == 0});
      return act(who, c.flow->start(flow_look(c.session)));
    }
    attempt(who);
  }

  // The contender's next round: at once, or a try's at a later step (tried
  // again at once, a try would find the same queue: it rests, so that it
  // may find the lock free).
  void next_round(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.tries && c.rounds_left > 0) {
      c.resting = true;
      return;
    }
    begin(who);
  }

  void wake_up(int who) {
    contenders_[static_cast<std::size_t>(who)].resting = false;
    begin(who);
  }

  // A new attempt of the fair queue: a node of its own (a semaphore's
  // lease: created only, the wait for room decides).
  void attempt(int who, bool lease = false) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    ++c.run;  // (a local_mutex's flow, a semaphore's acquire make several)
    current_ = who;
    char uuid[40];
    std::snprintf(uuid, sizeof uuid, "%08x-0000-4000-8000-%012llx", static_cast<unsigned>(who),
                  static_cast<unsigned long long>(++uuids_));
    c.fsm.emplace(fa::contender{.kind = lease ? node_kind::lease : c.kind,
                                .uuid = uuid,
                                .confirm_owner = o_.queue == options::recipe::election,
                                .one_look = c.tries,
                                .create_only = lease});
    act(who, c.fsm->start(*this));
  }

  // A request whose reply is `ok` (the connection's wait, a sync).
  void answer(int who, sim::event ok, std::function<sim::event(zkasio::error_code)> fails) {
    server_request(who, fails, [this, who, ok, fails](std::uint32_t run) { reply(who, run, ok, fails); });
  }
  // A deletion watch on `name`: `fired` once it goes (at once if it is not there).
  void watch_deleted(int who, std::string name, sim::event fired, std::function<sim::event(zkasio::error_code)> fails) {
    server_request(who, std::move(fails), [this, who, name, fired](std::uint32_t run) {
      if (!server_.count(name)) return reply(who, run, fired, nullptr);
      note("c" + std::to_string(who) + " watches " + name);
      watches_.emplace(name, watch{who, run, fired});
    });
  }

  // Carries one action out on the model; `fails` is how its reply fails.
  // `request` is told the attempt that asked: a stopped one's request
  // still takes effect, but its reply is not the next attempt's.
  void server_request(int who, std::function<sim::event(zkasio::error_code)> fails,
                      std::function<void(std::uint32_t run)> request) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    c.pending_failed = std::move(fails);
    submit(c.session, [request = std::move(request), run = c.run] { request(run); });
  }

  void act(int who, fa::action a) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    c.last_action = name_of(a) + (std::holds_alternative<fa::wait_gone>(a) ? " " + std::get<fa::wait_gone>(a).name : std::string());
    note("c" + std::to_string(who) + " s" + std::to_string(c.session) + " " + name_of(a) +
         (std::holds_alternative<fa::fail>(a) ? " " + std::get<fa::fail>(a).ec.message() : std::string()) +
         (std::holds_alternative<fa::wait_gone>(a) ? " " + std::get<fa::wait_gone>(a).name + (std::get<fa::wait_gone>(a).here ? " here" : "") : std::string()) +
         (std::holds_alternative<fa::look_up>(a) ? " " + std::get<fa::look_up>(a).name : std::string()));
    auto s = c.session;
    current_ = who;
    if (std::holds_alternative<fa::keep_waiting>(a)) return;  // (what is pending stands)
    c.waiting_here = false;
    c.pending_failed = nullptr;
    if (std::holds_alternative<fa::connect>(a)) {
      return answer(who, fa::connected{}, [](zkasio::error_code ec) -> fa::event { return fa::connected{ec}; });
    }
    if (std::holds_alternative<fa::create_and_list>(a)) {
      auto fails = [](zkasio::error_code ec) -> fa::event { return fa::created_and_listed{.create_ec = ec, .list_ec = ec}; };
      auto uuid = c.fsm->who().uuid;
      auto kind = c.fsm->who().kind;
      auto downgrade_of = c.fsm->who().downgrade_of;
      return server_request(who, fails, [this, who, s, uuid, kind, fails, downgrade_of](std::uint32_t run) {
        char suffix[16];
        std::snprintf(suffix, sizeof suffix, "%010d", static_cast<int>(counter_++));
        auto name = lock_node_prefix(uuid, kind) + suffix;
        if (downgrade_of) {  // (a plain ephemeral create, of its write node's sequence)
          auto write = lock_name(node_kind::write);
          name = lock_node_prefix(uuid, kind) + downgrade_of->substr(downgrade_of->find(write) + write.size());
          if (server_.count(name)) return reply(who, run, fa::created_and_listed{.create_ec = code(zk_error::node_exists)}, fails);
        }
        auto node = *parse_lock_node(name);
        auto st = make_node(node.name, node, who, run);
        reply(who, run, fa::created_and_listed{.node = node, .stat = st}, fails);
        sessions_[s].inbox.back().listing = listing(kind);
      });
    }
    if (std::holds_alternative<fa::list>(a)) {
      auto fails = [](zkasio::error_code ec) -> fa::event { return fa::listed{ec, nullptr}; };
      return server_request(who, fails, [this, who, fails, kind = c.fsm->who().kind](std::uint32_t run) {
        reply(who, run, fa::listed{{}, known_view(listing(kind))}, fails);
      });
    }
    if (std::holds_alternative<fa::confirm>(a))
      return answer(who, fa::confirmed{}, [](zkasio::error_code ec) -> fa::event { return fa::confirmed{ec}; });
    if (std::holds_alternative<fa::sync>(a)) {
      return answer(who, fa::synced{}, [](zkasio::error_code ec) -> fa::event { return fa::synced{ec}; });
    }
    if (auto* l = std::get_if<fa::look_up>(&a)) {
      auto fails = [](zkasio::error_code ec) -> fa::event { return fa::looked_up{ec, std::nullopt}; };
      auto name = l->name;
      bool own = name == c.fsm->node().name;
      return server_request(who, fails, [this, who, name, own, fails](std::uint32_t run) {
        auto st = stat_of(name);
        if (planted_own_check() && own && !st) {  // the planted fault: "there"
          st = node_stat{};
          st->ephemeral_owner = sessions_[contenders_[static_cast<std::size_t>(who)].session].id;
        }
        reply(who, run, fa::looked_up{{}, st}, fails);
      });
    }
    if (std::holds_alternative<fa::make_parents>(a)) {
      return answer(who, fa::parents_made{}, [](zkasio::error_code ec) -> fa::event { return fa::parents_made{ec}; });
    }
    if (auto* w = std::get_if<fa::wait_gone>(&a)) {
      auto name = w->name;
      if (w->here) {
        c.waiting_here = true;
        if (!known_.count(name)) return sessions_[s].inbox.push_back({who, c.run, fa::gone{}, nullptr, true});
        local_waiters_[name].emplace_back(who, c.run);
        return;
      }
      auto fails = [](zkasio::error_code ec) -> fa::event { return fa::gone{ec}; };
      auto run = c.run;
      if (w->watch_own) {
        // Its own node's watch, then the exists after it (in one submission:
        // in this order).
        auto own = c.fsm->node().name;
        submit(s, [this, who, own, run] {
          if (server_.count(own)) watches_.emplace(own, watch{who, run, fa::own_gone{}});
          auto st = stat_of(own);
          if (!st) sessions_[contenders_[static_cast<std::size_t>(who)].session].inbox.push_back({who, run, fa::own_gone{}, nullptr});
          if (planted_own_check() && !st) {  // the planted fault: "there"
            st = node_stat{};
            st->czxid = contenders_[static_cast<std::size_t>(who)].fsm->stat().czxid;
            st->ephemeral_owner = sessions_[contenders_[static_cast<std::size_t>(who)].session].id;
          }
          reply(who, run, fa::own_checked{{}, st}, [](zkasio::error_code ec) -> fa::event { return fa::own_checked{ec, std::nullopt}; });
        });
      }
      return watch_deleted(who, name, fa::gone{}, fails);
    }
    if (std::holds_alternative<fa::keep_waiting>(a)) return;
    if (std::holds_alternative<fa::grant>(a)) return granted(who);
    failed(who, std::get<fa::fail>(a).ec);
  }

  // --------------------------------------------------- the race recipes
  // The world as race_for's look reads it (the id comes with the
  // reconnection that tells the session expired).
  ra::look race_look(int s) const {
    auto& ss = sessions_[s];
    return {.generation = ss.generation, .session_id = ss.id, .connected = ss.connected, .awaiting_server = !ss.connected};
  }

  // race_for's part: the actions carried out on the model.
  void act(int who, ra::action a) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    c.last_action = name_of(a);
    note("c" + std::to_string(who) + " s" + std::to_string(c.session) + " " + name_of(a) +
         (std::holds_alternative<ra::fail>(a) ? " " + std::get<ra::fail>(a).ec.message() : std::string()));
    auto s = c.session;
    current_ = who;
    c.pending_failed = nullptr;
    if (std::holds_alternative<ra::connect>(a))
      return answer(who, ra::connected{}, [](zkasio::error_code ec) -> ra::event { return ra::connected{ec}; });
    if (auto* t = std::get_if<ra::take_turn>(&a)) return take_turn(who, t->wait);
    if (std::holds_alternative<ra::create>(a)) {
      c.submitted = true;
      auto fails = [](zkasio::error_code ec) -> ra::event { return ra::created{ec}; };
      return server_request(who, fails, [this, who, fails](std::uint32_t run) {
        if (server_.count(race_path)) return reply(who, run, ra::created{code(zk_error::node_exists)}, fails);
        reply(who, run, ra::created{{}, make_node(race_path, {}, who, run)}, fails);
      });
    }
    if (std::holds_alternative<ra::look_up>(a)) {
      auto fails = [](zkasio::error_code ec) -> ra::event { return ra::looked_up{ec}; };
      return server_request(who, fails, [this, who, s, fails](std::uint32_t run) {
        auto st = stat_of(race_path);
        if (o_.plant_skip_own_check) {  // the planted fault: "ours", whatever the server says
          if (!st) st = node_stat{};
          st->ephemeral_owner = sessions_[s].id;
        }
        reply(who, run, ra::looked_up{{}, st}, fails);
      });
    }
    if (std::holds_alternative<ra::sync>(a))
      return answer(who, ra::synced{}, [](zkasio::error_code ec) -> ra::event { return ra::synced{ec}; });
    if (std::holds_alternative<ra::confirm>(a))
      return answer(who, ra::confirmed{}, [](zkasio::error_code ec) -> ra::event { return ra::confirmed{ec}; });
    if (auto* r = std::get_if<ra::remove_own>(&a)) {
      // (delete_node asks again after a cut, and a retry that finds it gone
      // counts as deleted; the session over, its node went: lock_lost.)
      auto fails = [](zkasio::error_code ec) -> ra::event {
        return ra::removed{ec == zk_error::session_expired ? code(error::lock_lost) : zkasio::error_code{}};
      };
      return server_request(who, fails, [this, who, owner = r->owner, czxid = r->czxid, fails](std::uint32_t run) {
        reply(who, run, ra::removed{delete_race_node(owner, czxid) ? zkasio::error_code{} : code(error::lock_lost)}, fails);
      });
    }
    if (std::holds_alternative<ra::watch>(a))
      return watch_deleted(who, race_path, ra::gone{}, [](zkasio::error_code ec) -> ra::event { return ra::gone{ec}; });
    // (The model keeps the path's parent: a create never finds it missing.)
    if (std::holds_alternative<ra::make_parents>(a)) return fail("c" + std::to_string(who) + " makes parents that are there");
    if (auto* g = std::get_if<ra::granted>(&a)) return race_granted(who, g->stat);
    failed(who, std::get<ra::fail>(a).ec);
  }

  // local_turns: the turn at once when nobody has it; else waited for in
  // line (unless the line ended with its session), or, a try, refused.
  void take_turn(int who, bool wait) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    c.line = {c.session, c.race->generation()};
    auto& line = lines_[c.line];
    if (wait && line.ended) return wake(who, c.run, ra::turn_taken{line.ended, false});
    if (line.holder == 0) {
      line.holder = c.turn = ++turns_given_;
      return wake(who, c.run, ra::turn_taken{});
    }
    if (!wait) return wake(who, c.run, ra::turn_taken{{}, false});
    line.waiting.emplace_back(who, c.run);
  }
  // The turn `turn` passes on to the next in its line, or the line ends.
  void pass_turn(line_key key, std::uint64_t turn) {
    auto it = lines_.find(key);
    if (it == lines_.end() || it->second.holder != turn) return fail("a turn passed on by one that does not have it");
    auto& line = it->second;
    if (line.waiting.empty()) {
      lines_.erase(it);
      return;
    }
    auto [next, run] = line.waiting.front();
    line.waiting.pop_front();
    line.holder = contenders_[static_cast<std::size_t>(next)].turn = ++turns_given_;
    wake(next, run, ra::turn_taken{});
  }
  // The session's earlier generations are over (report_session_end): their
  // lines' waiters fail, as whoever enters them later does.
  void end_lines(int s) {
    for (auto& [key, line] : lines_)
      if (key.first == s && key.second < sessions_[s].generation) {
        line.ended = code(zk_error::session_expired);
        for (auto [who, run] : std::exchange(line.waiting, {})) wake(who, run, ra::turn_taken{line.ended, false});
      }
  }

  // Whether the race node `there` is `owner`'s and, when `czxid` is
  // known, that incarnation (delete_node's check).
  static bool race_node_of(const std::optional<node_stat>& there, std::int64_t owner, std::int64_t czxid) {
    return there && there->ephemeral_owner == owner && (czxid == 0 || there->czxid == czxid);
  }
  // Deletes the race node if it is `owner`'s (the incarnation `czxid`);
  // whether it did.
  bool delete_race_node(std::int64_t owner, std::int64_t czxid) {
    if (!race_node_of(stat_of(race_path), owner, czxid)) return false;
    erase_node(race_path);
    return true;
  }

  // A request of the runner's own in session `s`: `at_server` is carried
  // out when the server gets it, and says what its reply does once it comes.
  void runner_request(int s, std::function<std::function<void(zkasio::error_code)>()> at_server) {
    submit(s, [this, s, at_server] {
      sessions_[s].inbox.push_back({.contender = -1, .run = 0, .event = {}, .failed = nullptr, .now = false,
                                    .listing = {}, .produced_at = r_.steps, .answer = true, .to_runner = at_server()});
    });
  }
  // The removal of a race node of `owner` (remove_race_node after an
  // attempt that sent a create, delete_node at a release), request by
  // request as the runner makes them: exists, then, if the node is
  // `owner`'s (the incarnation `czxid`, when known), a delete by its path;
  // after a cut, asked again from the exists. Once over, or once the
  // session is (its node went with it), the turn `turn` passes on.
  void remove_race_node(int s, line_key line, std::uint64_t turn, std::int64_t owner, std::int64_t czxid) {
    auto over = [this, s, line] { return sessions_[s].generation != line.second; };
    auto again = [this, s, line, turn, owner, czxid] { remove_race_node(s, line, turn, owner, czxid); };
    runner_request(s, [=, this] {
      auto there = stat_of(race_path);
      return std::function<void(zkasio::error_code)>([=, this](zkasio::error_code ec) {
        if (over()) return pass_turn(line, turn);
        if (ec) return again();
        if (!race_node_of(there, owner, czxid)) return pass_turn(line, turn);
        runner_request(s, [=, this] {
          if (server_.count(race_path)) erase_node(race_path);  // (by path: whichever incarnation is there now)
          return std::function<void(zkasio::error_code)>([=, this](zkasio::error_code ec) {
            if (ec && !over()) return again();  // (a retry that finds it gone is done)
            pass_turn(line, turn);
          });
        });
      });
    });
  }

  // A race grant: of the node its own attempt made, in its session (its
  // turn makes that node its own), on answers made while it was there.
  void race_granted(int who, const node_stat& st) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    auto made = incarnations_.find(st.czxid);
    if (made == incarnations_.end() || made->second.maker != who || made->second.run != c.run ||
        made->second.owner != c.race->session_id())
      return fail("c" + std::to_string(who) + " granted the node at " + race_path + " (czxid " +
                  std::to_string(st.czxid) + "), which its attempt did not make in its session");
    hold(who, race_path, st.czxid);
  }

  // A race attempt over: out of its line; its turn passed on, after the
  // removal of its node if it sent a create.
  void end_race(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (auto it = lines_.find(c.line); it != lines_.end())
      std::erase_if(it->second.waiting, [who](auto& waiter) { return waiter.first == who; });
    if (c.turn == 0) return;
    if (c.submitted) return remove_race_node(c.session, c.line, c.turn, c.race->session_id(), 0);
    pass_turn(c.line, c.turn);
  }

  // ------------------------------------------------------- the semaphore
  // A semaphore's contenders: lease_acquire around fair_acquire's attempts
  // (its mutex's node, then each lease's, create_only) and room_wait; the
  // harness plays engine_leases.cpp's acquire_leases and wait_for_room.
  la::look lease_look(int s) const { return {.generation = sessions_[s].generation}; }
  rw::look room_look(int who) const {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    return {.generation = sessions_[c.session].generation, .mutex_lost = c.mutex_lost};
  }

  void act(int who, la::action a) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    c.last_action = name_of(a);
    note("c" + std::to_string(who) + " s" + std::to_string(c.session) + " " + name_of(a) +
         (std::holds_alternative<la::fail>(a) ? " " + std::get<la::fail>(a).ec.message() : std::string()));
    current_ = who;
    // The attempt left (failed, or another begins): its leases go first,
    // whatever the event was (as the runner does).
    if (std::holds_alternative<la::take_mutex>(a) || std::holds_alternative<la::fail>(a)) drop_leases(who);
    if (std::holds_alternative<la::take_mutex>(a)) {
      release_guard(who);
      return attempt(who);
    }
    if (std::holds_alternative<la::make_lease>(a)) return attempt(who, true);
    if (std::holds_alternative<la::wait_for_room>(a)) {
      rw::leases leases{.generation = c.lease_fsm->generation(), .max = semaphore_size_, .one_look = c.tries};
      for (auto& lease : c.mine) leases.names.push_back(lease.name);
      c.room.emplace(std::move(leases));
      return act(who, c.room->start(room_look(who)));
    }
    release_guard(who);  // (granted or failed: the mutex goes)
    if (std::holds_alternative<la::granted>(a)) return leases_granted(who);
    if (!fed_unwaited(who, std::get<la::fail>(a).ec)) next_round(who);
  }

  // A fair attempt of the acquire's ended: its mutex taken, or a lease made
  // (then known by its name); what follows is the machine's (act() removes
  // the attempt's leases if it leaves the attempt).
  void fair_part_ended(int who, zkasio::error_code ec) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    auto& fsm = *c.fsm;
    bool mutex = fsm.who().kind != node_kind::lease;
    if (ec) {
      // (Nothing of it to keep: a create that may have taken effect goes
      // with the attempt's removal.)
    } else if (mutex) {
      c.guard.emplace(fsm.node().name, fsm.generation());
      c.guard_czxid = fsm.stat().czxid;
      c.mutex_lost = !server_.count(fsm.node().name);  // (gone since the answers it was granted on)
    } else {
      c.mine.push_back({fsm.node().name, fsm.stat().czxid, fsm.generation()});
    }
    auto now = lease_look(c.session);
    if (mutex) return act(who, c.lease_fsm->resume(la::mutex_taken{ec}, now));
    act(who, c.lease_fsm->resume(la::lease_made{ec, fsm.generation()}, now));
  }

  void act(int who, rw::action a) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    c.last_action = std::string("room ") + name_of(a);
    note("c" + std::to_string(who) + " s" + std::to_string(c.session) + " room " + name_of(a) +
         (std::holds_alternative<rw::fail>(a) ? " " + std::get<rw::fail>(a).ec.message() : std::string()));
    current_ = who;
    c.pending_failed = nullptr;
    if (std::holds_alternative<rw::list>(a)) {
      auto fails = [](zkasio::error_code ec) -> rw::event { return rw::listed{ec}; };
      return server_request(who, fails, [this, who, fails](std::uint32_t run) {
        rw::listed l{.ec = {}, .children = {}, .cversion = leases_cversion_};
        for (auto& node : listing(node_kind::lease)) l.children.push_back(node.name);
        reply(who, run, std::move(l), fails);
      });
    }
    if (std::holds_alternative<rw::confirm>(a))
      return answer(who, rw::confirmed{}, [](zkasio::error_code ec) -> rw::event { return rw::confirmed{ec}; });
    if (std::holds_alternative<rw::connect>(a))
      return answer(who, rw::connected{}, [](zkasio::error_code ec) -> rw::event { return rw::connected{ec}; });
    if (auto* w = std::get_if<rw::watch>(&a)) {
      // The children's watch, or the mutex's loss, whichever comes first
      // (the latch already set: at once).
      c.room_watching = true;
      if (c.mutex_lost) return wake(who, c.run, rw::mutex_lost{});
      auto fails = [](zkasio::error_code ec) -> rw::event { return rw::changed{ec}; };
      return server_request(who, fails, [this, who, fails, from = w->cversion](std::uint32_t run) {
        if (from != leases_cversion_) return reply(who, run, rw::changed{}, fails);
        leases_watches_.emplace_back(who, run);
      });
    }
    auto* failed = std::get_if<rw::fail>(&a);
    act(who, c.lease_fsm->resume(la::room_ended{failed ? failed->ec : zkasio::error_code{}, c.mutex_lost},
                                 lease_look(c.session)));
  }

  // The leases' children changed: their watches fire.
  void leases_changed() {
    ++leases_cversion_;
    for (auto [who, run] : std::exchange(leases_watches_, {})) {
      note("children watch of c" + std::to_string(who) + " fires");
      auto& c = contenders_[static_cast<std::size_t>(who)];
      reply(who, run, rw::changed{}, nullptr);
      sessions_[c.session].inbox.back().answer = false;  // (an event: it waits for the connection, in no order)
      if (c.run == run) c.pending_failed = nullptr;      // (answered: an expiry does not fail it again)
    }
  }
  // The node `name` (the incarnation `czxid`) went: a semaphore's mutex
  // held by an attempt is lost (its hold's lost signal sets the latch, and
  // a wait for room that watches learns it).
  void mutex_gone(const std::string& name, std::int64_t czxid) {
    for (int i = 0; i < static_cast<int>(contenders_.size()); ++i) {
      auto& c = contenders_[static_cast<std::size_t>(i)];
      if (!c.guard || c.guard->first != name || c.guard_czxid != czxid || c.mutex_lost) continue;
      if (o_.plant_skip_own_check) continue;  // the planted fault: never told
      c.mutex_lost = true;
      if (c.room_watching) wake(i, c.run, rw::mutex_lost{});
    }
  }
  // The mutex an attempt holds, released (deleted in the background); its
  // wait for room is over.
  void release_guard(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (auto guard = std::exchange(c.guard, std::nullopt)) delete_held(c.session, guard->first, guard->second);
    c.mutex_lost = c.room_watching = false;
    c.room.reset();
  }
  // The attempt's (or the holder's) lease nodes go.
  void drop_leases(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    for (auto& lease : std::exchange(c.mine, {})) delete_held(c.session, lease.name, lease.generation);
  }
  // Stopped (the deadline, a cancellation): what runs stops, its node goes;
  // the attempt's leases go, and its mutex.
  void stop_leases(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.fsm && !c.fsm->finished()) {
      c.fsm->abort();
      remove_attempt_node(who);
    }
    ++c.run;
    release_guard(who);
    drop_leases(who);
    c.lease_fsm.reset();
    next_round(who);
  }
  // A grant of the attempt's leases: decided on answers made while each
  // was on the server, in its session.
  void leases_granted(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    ++r_.grants;
    for (auto& [name, czxid, made_in] : c.mine)
      if (auto deleted = incarnations_[czxid].deleted_at; deleted && *deleted < c.decided_at)
        return fail("c" + std::to_string(who) + " granted its lease " + name + " on answers made after it was deleted");
    c.holding = true;
    c.hold_steps = 1 + pick(20);
  }
  // Of the leases held whose nodes are on the server, in their holder's
  // session: at most the semaphore's size; one holder of its mutex; one
  // wait for room that watches unaware that its mutex is lost (two would
  // count each other's leases, and might wait for ever).
  void check_leases() {
    std::size_t held = 0, guards = 0, unaware = 0;
    for (auto& c : contenders_) {
      auto on_server = [&](const std::string& name, std::int64_t czxid) {
        auto it = server_.find(name);
        return it != server_.end() && it->second.czxid == czxid && it->second.owner == sessions_[c.session].id;
      };
      if (c.holding)
        for (auto& lease : c.mine) held += on_server(lease.name, lease.czxid);
      if (c.guard && on_server(c.guard->first, c.guard_czxid)) ++guards;
      unaware += c.room_watching && !c.mutex_lost;
    }
    if (unaware > 1) fail(std::to_string(unaware) + " waits for room, each unaware that its mutex may be lost");
    if (held > semaphore_size_)
      fail(std::to_string(held) + " leases held of a semaphore of " + std::to_string(semaphore_size_));
    if (guards > 1) fail(std::to_string(guards) + " holders of the semaphore's mutex");
  }

  // --------------------------------------------- the in-process handoff
  // A local_mutex's lock objects, one a session, each with its local run
  // (engine.hpp's local_run): the harness plays acquire_op's part
  // (acquire_runner.cpp) and, at a release, engine_hold.cpp's hand_off and
  // pass_lead.
  af::look flow_look(int s) {
    auto& ss = sessions_[s];
    return {.generation = ss.generation, .connected = ss.connected, .run_active = runs_[s].active};
  }

  // acquire_op's carry_out: the flow's actions on the model.
  void act(int who, af::action a) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    auto& run = runs_[c.session];
    c.last_action = name_of(a);
    note("c" + std::to_string(who) + " s" + std::to_string(c.session) + " " + name_of(a) +
         (std::holds_alternative<af::fail>(a) ? " " + std::get<af::fail>(a).ec.message() : std::string()));
    current_ = who;
    c.pending_failed = nullptr;
    if (std::holds_alternative<af::attempt>(a)) {
      // The flow leads and nothing was handed over: the idle run's lead
      // (acquire_op's follow_lead).
      if (c.flow->leads() && !c.leads) run.active = c.leads = true;
      return attempt(who);
    }
    if (std::holds_alternative<af::wait_in_run>(a)) {
      run.waiting.emplace_back(who, c.flow);
      return;
    }
    if (std::holds_alternative<af::connect>(a))
      return answer(who, af::connected{}, [](zkasio::error_code ec) -> af::event { return af::connected{ec}; });
    if (std::holds_alternative<af::keep_waiting>(a)) return;
    if (std::holds_alternative<af::take_handed>(a)) {
      c.run_held = std::exchange(c.handed, nullptr);
      return hold(who, c.run_held->name, c.run_held->czxid, c.run_held->handed);
    }
    if (std::holds_alternative<af::granted>(a)) {
      // The lead goes to the hold (run_lead::hand_to) when its node is sure;
      // else on to the next waiter.
      c.run_held = std::make_shared<run_hold>(run_hold{.session = c.session,
                                                       .name = c.fsm->node().name,
                                                       .czxid = c.fsm->stat().czxid,
                                                       .owner = c.fsm->stat().ephemeral_owner,
                                                       .generation = c.fsm->generation()});
      hold(who, c.run_held->name, c.run_held->czxid);
      if (std::exchange(c.leads, false)) {
        c.run_held->in_run = node_sure(*c.run_held);
        if (!c.run_held->in_run) pass_lead(c.session);
      }
      return;
    }
    // (A pass_on comes of a hand-over after the flow ended: hand_over's.
    // No reentry is asked, so no granted_again.)
    if (!std::holds_alternative<af::fail>(a)) return fail("c" + std::to_string(who) + "'s flow said " + name_of(a));
    if (std::exchange(c.leads, false)) pass_lead(c.session);  // (acquire_op's complete drops its lead)
    if (!fed_unwaited(who, std::get<af::fail>(a).ec)) begin(who);
  }

  // A fair attempt of the flow's ended: a failed one's node goes first.
  void attempt_ended(int who, zkasio::error_code ec) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (ec) remove_attempt_node(who);
    if (c.lease_fsm) return fair_part_ended(who, ec);
    act(who, c.flow->resume(af::attempt_ended{ec, c.fsm->generation()}, flow_look(c.session)));
  }
  // acquire_op's stop_with: a wait in the run leaves its line; an attempt
  // stops, its node goes.
  void stop_flow(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    bool waiting = c.flow->waiting_in_run();
    auto next = c.flow->resume(af::stopped{code(error::lock_timeout)}, flow_look(c.session));
    if (waiting) std::erase_if(runs_[c.session].waiting, [&](auto& waiter) { return waiter.second == c.flow; });
    if (c.fsm && !c.fsm->finished()) {
      c.fsm->abort();
      remove_attempt_node(who);
    }
    ++c.run;
    act(who, next);
  }

  // Whether the run's node is sure to be there (hold_sure: not lost, its
  // session connected).
  bool node_sure(const run_hold& h) const {
    auto it = server_.find(h.name);
    return it != server_.end() && it->second.czxid == h.czxid && it->second.owner == sessions_[h.session].id &&
           sessions_[h.session].connected;
  }

  // give_back: a released (or lost) hold that leads the run hands the lock
  // to the next waiter in memory when the rule says so (hand_off); else its
  // node is deleted and the lead passes on (pass_lead).
  void give_back(const std::shared_ptr<run_hold>& h) {
    auto& run = runs_[h->session];
    bool waiting = !run.waiting.empty();
    if (h->in_run && mutex_queue.next_after_release({}, 16, std::chrono::seconds(1), waiting, node_sure(*h),
                                                    std::chrono::steady_clock::time_point()) == after_release::hand_off) {
      ++h->handed;
      return hand_over(h->session, h);
    }
    delete_held(h->session, h->name, h->generation);
    if (std::exchange(h->in_run, false)) pass_lead(h->session);
  }
  void pass_lead(int s) {
    auto& run = runs_[s];
    run.active = !run.waiting.empty();
    if (run.active) hand_over(s, nullptr);
  }
  // The next waiter of session `s`'s run is handed the hold `h` (the lock),
  // or with none the lead: told in a later step, when it may have stopped
  // meanwhile (its flow then says pass_on).
  void hand_over(int s, std::shared_ptr<run_hold> h) {
    auto [who, flow] = std::move(runs_[s].waiting.front());
    runs_[s].waiting.pop_front();
    note("c" + std::to_string(who) + " handed the " + (h ? "lock" : "lead"));
    sessions_[s].inbox.push_back({.contender = -1, .run = 0, .event = {}, .failed = nullptr, .now = true,
                                  .listing = {}, .produced_at = r_.steps, .answer = false,
                                  .to_runner = [this, who, flow, h](zkasio::error_code) { take_over(who, flow, h); }});
  }
  // acquire_op's handed: the flow that waited takes what it was handed, or
  // passes it on (the planted fault: drops it).
  void take_over(int who, const std::shared_ptr<af>& flow, const std::shared_ptr<run_hold>& h) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    current_ = who;
    auto next = flow->resume(af::handed{.lock = h != nullptr, .generation = h ? h->generation : 0, .sure = h && node_sure(*h)},
                             flow_look(c.session));
    if (std::holds_alternative<af::pass_on>(next)) {
      note("c" + std::to_string(who) + " passes on what it was handed");
      if (o_.plant_skip_own_check) return;  // the planted fault: dropped
      return h ? give_back(h) : pass_lead(c.session);
    }
    // (Not finished before: it is the contender's flow now.)
    if (h && std::holds_alternative<af::take_handed>(next)) {
      c.handed = h;
    } else {
      // The lead; or a lock that may be lost or whose session has ended,
      // which leaves the run (run_lead::taken_from): its node goes, and this
      // one leads instead.
      if (h) {
        h->in_run = false;
        delete_held(h->session, h->name, h->generation);
      }
      c.leads = true;
    }
    act(who, next);
  }

  std::shared_ptr<const queue_view> known_view(std::vector<lock_node> queue) const {
    return std::make_shared<const queue_view>(
        make_view(std::move(queue), [this](const lock_node& n) { return known_.count(n.name) > 0; }));
  }

  // A grant: decided on answers that the server made when the node was
  // there, first by the queue's rule; its token greater than the earlier
  // grants'. (An operator's delete after those answers cannot be known:
  // the holder's lost signal tells it then.)
  void granted(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.flow || c.lease_fsm) return attempt_ended(who, {});
    hold(who, c.fsm->node().name, c.fsm->stat().czxid);
  }
  // The grant of the node `name`, the incarnation `czxid`; its fencing
  // token that czxid, and the hand-overs of the node in its local run.
  void hold(int who, const std::string& name, std::int64_t czxid, std::uint64_t handed = 0) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    ++r_.grants;
    c.held_kind = c.fsm && c.fsm->who().downgrade_of ? node_kind::read : c.kind;
    // A downgrade's write lock goes once its read lock is granted; its token
    // is the write lock's, which it may equal.
    auto kept = std::exchange(c.downgrading, std::nullopt);
    if (kept) release_kept_write(c, *kept);
    if (auto deleted = incarnations_[czxid].deleted_at; deleted && *deleted < c.decided_at)
      return fail("granted " + name + " on answers made after it was deleted");
    // Its session's end is known to the process, unlike an operator's
    // delete: an answer of a session that has ended, read in the next one
    // (a process paused past its timeout), grants nothing.
    if (incarnations_[czxid].owner != sessions_[c.session].id)
      return fail("granted " + name + " (czxid " + std::to_string(czxid) + ") of a session that had ended");
    c.holding = true;
    c.held_node = name;
    c.held_czxid = czxid;
    c.hold_steps = 1 + pick(20);
    // Gone since those answers (an operator): lost at once (its holder's
    // monitor finds it gone), beside the grants that came after its delete.
    if (!holds_on_server(c)) return;
    auto token = std::pair(kept ? kept->czxid : czxid, handed);
    bool exclusive = c.held_kind != node_kind::read;
    if (kept ? token < last_write_token_ : token <= (exclusive ? last_token_ : last_write_token_))
      return fail("the fencing token (" + std::to_string(czxid) + ", " + std::to_string(handed) +
                  ") of a grant is not greater than an earlier one's");
    last_token_ = std::max(last_token_, token);
    if (exclusive) last_write_token_ = token;
  }

  // Whether the holder's node, that incarnation, is on the server, of its
  // session.
  bool holds_on_server(const contender_model& c) const { return on_server(c, c.held_node, c.held_czxid); }
  bool on_server(const contender_model& c, const std::string& name, std::int64_t czxid) const {
    auto it = server_.find(name);
    return it != server_.end() && it->second.czxid == czxid && it->second.owner == sessions_[c.session].id;
  }

  // A writer's downgrade: it keeps its write lock while a read lock is
  // acquired on a node of the write node's sequence (fair_acquire with
  // downgrade_of), as a shared_mutex's owner asks for it.
  void downgrade(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    note("c" + std::to_string(who) + " downgrades " + c.held_node);
    c.holding = false;
    c.downgrading = contender_model::kept_write{c.held_node, c.held_czxid, c.fsm->generation()};
    ++c.run;
    current_ = who;
    auto uuid = c.fsm->who().uuid;
    c.fsm.emplace(fa::contender{.kind = node_kind::read, .uuid = uuid, .downgrade_of = c.downgrading->name});
    act(who, c.fsm->start(*this));
  }
  // The write lock kept by a downgrade, released: once the read lock is
  // granted, or the downgrade failed or stopped.
  void release_kept_write(contender_model& c, const contender_model::kept_write& kept) {
    note("releases the kept write " + kept.name);
    delete_held(c.session, kept.name, kept.generation);
  }

  // One holder: among the holders whose node is on the server (of their
  // session: the others are lost, and told), a writer alone, readers
  // beside readers.
  void check_holders() {
    if (o_.queue == options::recipe::semaphore) return check_leases();
    int writers = 0, readers = 0;
    for (auto& c : contenders_)
      if (c.holding && holds_on_server(c)) (c.held_kind == node_kind::read ? readers : writers)++;
      else if (c.downgrading && on_server(c, c.downgrading->name, c.downgrading->czxid)) ++writers;
    if (writers > 1 || (writers == 1 && readers > 0))
      fail(std::to_string(writers) + " writers and " + std::to_string(readers) + " readers hold at once");
  }

  // An attempt that failed; internal_error: the harness fed it an event it
  // did not wait for (a broken promise of the runner's).
  void failed(int who, zkasio::error_code ec) {
    if (fed_unwaited(who, ec)) return;
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.flow || c.lease_fsm) return attempt_ended(who, ec);
    ended(who);
  }
  bool fed_unwaited(int who, zkasio::error_code ec) {
    if (ec == error::internal_error) fail("c" + std::to_string(who) + " was fed an event it did not wait for");
    return ec == error::internal_error;
  }

  // A failed or stopped attempt: its node goes (the runner's background
  // removal: by name, or found by its uuid).
  void ended(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (auto kept = std::exchange(c.downgrading, std::nullopt)) release_kept_write(c, *kept);
    if (c.race) {
      end_race(who);
      c.race.reset();
    } else {
      remove_attempt_node(who);
    }
    next_round(who);
  }
  void remove_attempt_node(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.fsm->submitted()) remove_mine(c.session, c.fsm->who().uuid, c.fsm->generation(), c.fsm->node().name);
  }
  // By name when its reply named it (found gone: known gone), else found by
  // its uuid, only while it is its session's (delete_node, remove_attempt_node).
  void remove_mine(int s, uuid_text uuid, std::uint64_t gen, std::string name) {
    submit(s, [this, s, uuid, gen, name] {
      if (sessions_[s].generation != gen) return;  // went with its session
      for (auto& [server_name, n] : server_)
        if (n.node.uuid() == uuid && n.owner == sessions_[s].id) {
          auto gone_name = server_name;
          erase_node(gone_name);
          forget(gone_name);
          return;
        }
      if (!name.empty()) forget(name);
    });
  }

  void release(int who) {
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.downgrades && c.held_kind == node_kind::write && holds_on_server(c) &&
        std::exchange(c.downgrade_next, !c.downgrade_next))
      return downgrade(who);
    note("c" + std::to_string(who) + " releases " + c.held_node);
    c.holding = false;
    if (c.race) {
      remove_race_node(c.session, c.line, c.turn, c.race->session_id(), c.held_czxid);
      return next_round(who);
    }
    if (auto h = std::exchange(c.run_held, nullptr)) {
      give_back(h);
      return next_round(who);
    }
    if (c.lease_fsm) {
      drop_leases(who);
      return next_round(who);
    }
    delete_held(c.session, c.held_node, c.fsm->generation());
    next_round(who);
  }
  // A release's delete of the node `name` its session's generation `gen` made.
  void delete_held(int s, std::string name, std::uint64_t gen) {
    submit(s, [this, s, name, gen] {
      if (sessions_[s].generation != gen) return;
      if (auto it = server_.find(name); it != server_.end() && it->second.owner == sessions_[s].id) erase_node(name);
      forget(name);
    });
  }

  // ----------------------------------------------------------------- steps
  // One random step; false when nothing could happen.
  bool step(bool faults) {
    std::vector<std::function<void()>> moves;
    for (int s = 0; s < static_cast<int>(sessions_.size()); ++s) {
      auto& ss = sessions_[s];
      if (!ss.inbox.empty() && (ss.connected || ss.inbox.front().now)) moves.push_back([this, s] { deliver(s); });
      if (ss.connected && !ss.inbox.empty() && !ss.inbox.front().now) moves.push_back([this, s] { receive(s); });
      if (!ss.connected && !faults) moves.push_back([this, s] { reconnect(s); });
      if (faults && !ss.connected && chance(30)) moves.push_back([this, s] { reconnect(s); });
      if (faults && ss.connected && chance(3)) moves.push_back([this, s] { disconnect(s); });
      if (faults && chance(1)) moves.push_back([this, s] { expire(s); });
    }
    for (int i = 0; i < static_cast<int>(contenders_.size()); ++i) {
      auto& c = contenders_[static_cast<std::size_t>(i)];
      if (c.holding && --c.hold_steps <= 0) moves.push_back([this, i] { release(i); });
      // (A rest of some 30 steps, so that a try may come when the queue is
      // empty; at once when nothing else can happen.)
      if (c.resting && chance(3)) moves.push_back([this, i] { wake_up(i); });
      if (faults && acquiring(c) && chance(2)) moves.push_back([this, i] { stop(i); });
    }
    if (faults && !server_.empty() && chance(2)) moves.push_back([this] { operator_delete(); });
    for (int i = 0; moves.empty() && i < static_cast<int>(contenders_.size()); ++i)
      if (contenders_[static_cast<std::size_t>(i)].resting) moves.push_back([this, i] { wake_up(i); });
    if (moves.empty()) return false;
    moves[pick(moves.size())]();
    return true;
  }

  // The client reads the next reply or event off its connection before the
  // process runs its completion: a cut, an expiry, even the next session's
  // connection may come between (a process paused past its session's
  // timeout reads it on waking), and the answer comes as it was.
  void receive(int s) {
    auto& d = sessions_[s].inbox.front();
    note("s" + std::to_string(s) + " receives " + (d.to_runner ? std::string("a runner's reply") : name_of(d.event)));
    d.failed = nullptr;
    d.now = true;
  }

  void deliver(int s) {
    auto d = std::move(sessions_[s].inbox.front());
    sessions_[s].inbox.pop_front();
    if (d.to_runner) return d.to_runner(d.runner_ec);
    auto& c = contenders_[static_cast<std::size_t>(d.contender)];
    if (d.run != c.run || !waits_for(c, d.event)) {  // stale: dropped
      note("c" + std::to_string(d.contender) + " drops a stale " + name_of(d.event));
      return;
    }
    current_ = d.contender;
    c.decided_at = std::max(c.decided_at, d.produced_at);
    note("c" + std::to_string(d.contender) + " <- " + name_of(d.event) + error_in(d.event));
    if (auto* flow = std::get_if<af::event>(&d.event)) return act(d.contender, c.flow->resume(*flow, flow_look(s)));
    if (auto* room = std::get_if<rw::event>(&d.event)) {
      c.room_watching = false;
      return act(d.contender, c.room->resume(*room, room_look(d.contender)));
    }
    auto* fair = std::get_if<fa::event>(&d.event);
    if (!fair) return act(d.contender, c.race->resume(std::get<ra::event>(d.event), race_look(s)));
    if (auto* created = std::get_if<fa::created_and_listed>(fair); created && !created->create_ec) {
      // The create's completion adopts the node; the listing sent after it
      // counts it known.
      known_[created->node.name] = {created->node.kind, c.session, d.generation};
      created->view = known_view(std::move(d.listing));
    }
    act(d.contender, c.fsm->resume(std::move(*fair), *this));
  }

  // The connection drops: the replies in flight come as failures
  // (connection_loss); the watches' events wait for the connection.
  void disconnect(int s) {
    ++r_.faults;
    note("s" + std::to_string(s) + " disconnected");
    auto& ss = sessions_[s];
    ss.connected = false;
    for (auto& d : ss.inbox)
      if (d.failed) {
        d.event = d.failed(make_error_code(zk_error::connection_loss));
        d.failed = nullptr;
        d.now = true;
      } else if (d.to_runner && !d.now) {
        d.runner_ec = make_error_code(zk_error::connection_loss);
        d.now = true;
      }
  }
  void reconnect(int s) {
    auto& ss = sessions_[s];
    note("s" + std::to_string(s) + " reconnects" + (ss.expired ? " (expired)" : ""));
    if (ss.expired) {
      // A new session: the old one's requests and waits at the server end
      // with session_expired; the process learns that its nodes went.
      ss.expired = false;
      ss.id = next_session_id_++;
      ++ss.generation;
      ss.parked.clear();
      std::set<std::pair<int, std::uint32_t>> answered;
      for (auto& d : ss.inbox)
        if (d.answer) answered.emplace(d.contender, d.run);
      for (int i = 0; i < static_cast<int>(contenders_.size()); ++i) {
        auto& c = contenders_[static_cast<std::size_t>(i)];
        if (c.session != s) continue;
        if (c.holding) {
          c.holding = false;  // lost with its session (its node went; the run's lead goes on)
          if (auto h = std::exchange(c.run_held, nullptr)) give_back(h);
          if (c.lease_fsm) drop_leases(i);
          begin(i);
          continue;
        }
        if (acquiring(c) && !c.waiting_here && c.pending_failed && !answered.count({i, c.run}))
          ss.inbox.push_back({i, c.run, c.pending_failed(make_error_code(zk_error::session_expired)), nullptr, true});
      }
      for (auto& [name, e] : std::map(known_))
        if (e.session == s) forget(name);
      end_lines(s);
    }
    // The watches' events the server made while it was cut off come at the
    // reconnection, in no order of the changes (it answers each watch the
    // client sets again): shuffled.
    std::vector<std::size_t> events;
    for (std::size_t i = 0; i < ss.inbox.size(); ++i)
      if (!ss.inbox[i].answer && !ss.inbox[i].now) events.push_back(i);
    for (std::size_t i = events.size(); i > 1; --i) std::swap(ss.inbox[events[i - 1]], ss.inbox[events[pick(i)]]);
    ss.connected = true;
    ++ss.connections;
    auto parked = std::move(ss.parked);
    ss.parked.clear();
    for (auto& request : parked) request();
  }

  // The server expires the session (its client cut off: the replies in
  // flight fail as after any cut): its nodes and watches go.
  void expire(int s) {
    auto& ss = sessions_[s];
    if (ss.expired) return;
    note("s" + std::to_string(s) + " expires");
    disconnect(s);
    ss.expired = true;
    for (auto it = watches_.begin(); it != watches_.end();)
      it = contenders_[static_cast<std::size_t>(it->second.who)].session == s ? watches_.erase(it) : std::next(it);
    std::erase_if(leases_watches_, [&](auto& w) { return contenders_[static_cast<std::size_t>(w.first)].session == s; });
    std::vector<std::string> theirs;
    for (auto& [name, n] : server_)
      if (n.owner == ss.id) theirs.push_back(name);
    for (auto& name : theirs) erase_node(name);
  }

  void operator_delete() {
    ++r_.faults;
    auto it = server_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(pick(server_.size())));
    note("operator deletes " + it->first);
    erase_node(it->first);
  }

  // A deadline or a cancellation: the attempt stops where it stands.
  void stop(int who) {
    ++r_.stopped;
    note("c" + std::to_string(who) + " stopped");
    auto& c = contenders_[static_cast<std::size_t>(who)];
    if (c.flow) return stop_flow(who);
    if (c.lease_fsm) return stop_leases(who);
    if (c.fsm) c.fsm->abort();
    ++c.run;
    ended(who);
  }

  std::mt19937_64 random_;
  options o_;
  result r_;
  std::vector<session_model> sessions_;
  std::vector<contender_model> contenders_;
  std::map<std::string, server_node> server_;
  struct watch {
    int who;
    std::uint32_t run;
    sim::event fired;  // a fair waiter's own node's (own_gone) or another's (gone); a race's (gone)
  };
  std::multimap<std::string, watch> watches_;
  std::map<std::string, known_entry> known_;
  // Every node made, by its czxid: its owner, and when it left the server.
  struct incarnation {
    std::int64_t owner = 0;
    int maker = -1;  // the contender whose attempt `run` made it
    std::uint32_t run = 0;
    std::optional<std::uint64_t> deleted_at{};
  };
  std::map<std::int64_t, incarnation> incarnations_;
  // The race node's lines (local_turns): whose turn (a turn's number, 0:
  // nobody's) and who waits; a line ends with its session.
  struct turn_line {
    std::uint64_t holder = 0;
    std::deque<std::pair<int, std::uint32_t>> waiting;
    zkasio::error_code ended;
  };
  std::map<line_key, turn_line> lines_;
  std::uint64_t turns_given_ = 0;
  std::map<std::string, std::vector<std::pair<int, std::uint32_t>>> local_waiters_;
  std::int64_t next_session_id_ = 1;
  std::int64_t zxid_ = 0;
  std::uint32_t counter_ = 0;
  std::uint64_t uuids_ = 0;
  std::pair<std::int64_t, std::uint64_t> last_token_{}, last_write_token_{};
  std::map<int, local_run_model> runs_;  // a local_mutex's, by its lock object (one a session)
  // A semaphore's size, its leases path's cversion, and the children's
  // watches set on it (who, its attempt).
  std::size_t semaphore_size_ = 0;
  std::int32_t leases_cversion_ = 0;
  std::vector<std::pair<int, std::uint32_t>> leases_watches_;
  int current_ = 0;
};

}  // namespace

result run(std::uint64_t seed, const options& o) { return simulation(seed, o).go(); }

namespace {
constexpr std::pair<options::recipe, std::string_view> recipe_names[] = {
    {options::recipe::shared_mutex, "shared_mutex"},
    {options::recipe::mutex, "mutex"},
    {options::recipe::election, "election"},
    {options::recipe::race_mutex, "race_mutex"},
    {options::recipe::race_election, "race_election"},
    {options::recipe::local_mutex, "local_mutex"},
    {options::recipe::semaphore, "semaphore"},
};
}  // namespace

std::optional<options::recipe> recipe_named(std::string_view name) {
  for (auto [queue, its_name] : recipe_names)
    if (its_name == name) return queue;
  return std::nullopt;
}

std::string_view name_of(options::recipe queue) {
  for (auto [its_queue, name] : recipe_names)
    if (its_queue == queue) return name;
  return {};
}

}  // namespace zkasio::sim
