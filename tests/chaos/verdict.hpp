// The chaos suite's verdict: what its workers recorded, and the figures that
// must be zero. No I/O: test_chaos_verdict (unit tier) drives it with
// records made up to break each rule, so that a verdict that cannot fail
// fails a test.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkasio::chaos {

// CLOCK_MONOTONIC (std::chrono::steady_clock) in nanoseconds: one clock for
// every process of the machine, so the workers' intervals compare.
using ns = std::int64_t;

// The recipe a hold was granted by: it picks the rule that the holds of one
// lock object must keep together, and whether its tokens must rise.
enum class recipe { mutex, handoff_mutex, race_mutex, election_fair, election_race, shared_mutex, semaphore };
inline constexpr recipe all_recipes[] = {recipe::mutex,         recipe::handoff_mutex, recipe::race_mutex,
                                         recipe::election_fair, recipe::election_race, recipe::shared_mutex,
                                         recipe::semaphore};
std::string_view name(recipe r);
// The recipe called `n` (as name() calls it), if any.
std::optional<recipe> recipe_named(std::string_view n);

// A holder's interval: from its grant to the earlier of its release (the
// moment it began) and its lost signal.
struct hold_record {
  int worker = 0;
  int lock = 0;
  ns grant = 0;
  ns end = 0;
  std::int64_t token = 0;  // the fencing token
  bool lost = false;       // ended by the lost signal
  recipe kind = recipe::mutex;
  bool reader = false;  // shared_mutex: a shared (read) hold
  int leases = 1;       // semaphore: the leases this hold counts
  int capacity = 1;     // semaphore: N, the most leases held at once
  // handoff_mutex: the local handoffs on the token's node before this grant
  // (fence_token::local): its grants' tokens rise as the pair (token, local).
  std::uint64_t local = 0;
  bool curator = false;  // by a Curator worker (not on the line: the driver knows its workers)
  // When the acquire that granted it was asked for (-1: not known). A
  // grant is completed to the worker after the library decided it: a pause
  // between the two shows a grant made before the pause as one after it.
  ns asked = -1;
};

// After the faults stopped, a worker's last try of one of its lock objects:
// a free lock must be granted.
struct final_try {
  int worker = 0;
  int lock = 0;
  bool granted = false;
  bool curator = false;
};

// An acquire: when it started and completed (nullopt: it never did, the
// worker gave up waiting for it), its deadline, and what it completed with
// ("ok" or the error's name).
struct acquire_record {
  int worker = 0;
  int lock = 0;
  ns start = 0;
  std::optional<ns> end;
  ns deadline = 0;
  std::string result;
  bool curator = false;
};

// A worker that could not act, from..to: its process stopped (SIGSTOP) by
// the fault driver (`lock` -1: every lock), or the strand of its object of
// lock `lock` kept busy (the busy_strand fault): no lost signal can reach
// what it stopped, as for a paused process.
struct pause_window {
  int worker = 0;
  ns from = 0;
  ns to = 0;
  int lock = -1;
  bool covers(int w, int l) const { return worker == w && (lock < 0 || lock == l); }
};

// One worker's log, a line per record:
//   hold WORKER LOCK GRANT END TOKEN LOCAL LOST(0|1) RECIPE read|write LEASES CAPACITY ASKED
//   acquire WORKER LOCK START END|- DEADLINE RESULT   (DEADLINE -1: none)
//   final WORKER LOCK granted|refused
//   orphans WORKER COUNT     (nodes of its live session left after its last release)
//   leaked WORKER COUNT      (Curator's: nodes of its session it lost track of, deleted)
//   busy WORKER LOCK FROM TO (the strand of its object of lock LOCK kept busy)
struct worker_log {
  std::vector<hold_record> holds;
  std::vector<acquire_record> acquires;
  std::vector<final_try> final_tries;
  std::vector<pause_window> busy;
  std::optional<int> orphans;  // nullopt: the worker never got to count them
  // Curator's: nodes of its session still there once all its threads had
  // ended (CuratorWorker deletes them). Each stood at the head of its
  // lock's queue, every acquire without a deadline waiting behind it.
  int leaked = 0;
  std::vector<std::string> bad_lines;
};
std::string format(const hold_record& h);
std::string format(const acquire_record& a);
std::string format(const final_try& f);
std::string format(const pause_window& busy);  // a busy line
// Adds what `line` records to `log` (a line it cannot read goes to bad_lines).
void parse_line(std::string_view line, worker_log& log);

// What involves Curator's workers (tests/chaos/CuratorWorker.java), on the
// same lock paths under the same faults, counted apart: an overlap of a hold
// with a Curator hold, tokens out of order next to a Curator grant,
// Curator's late acquires and wedged locks. Curator's figures, not zkasio's.
struct beside_curator {
  std::size_t acquisitions = 0;
  std::size_t lost_signals = 0;  // holds ended by SUSPENDED or LOST
  std::size_t overlaps = 0;
  std::size_t tokens_out_of_order = 0;
  std::size_t grants_after_loss = 0;
  std::size_t late_acquires = 0;
  std::size_t wedged_locks = 0;
};

struct verdict {
  std::size_t acquisitions = 0;
  std::size_t lost_signals = 0;
  std::size_t long_holds = 0;        // over 1 s
  std::size_t acquire_failures = 0;  // timeouts, expiries: allowed, counted
  // Holds cut short by a pause of their process: the holder woke after its
  // session could have expired, which no lock can prevent (see the README's
  // guarantees); its interval counts up to the pause.
  std::size_t holds_cut_by_pause = 0;
  // Must be zero:
  std::size_t overlaps = 0;             // two holders of one lock at once
  std::size_t tokens_out_of_order = 0;  // a later grant of a lock with a token (token, local) not greater
  std::size_t grants_after_loss = 0;    // a grant of a node (its token) after a holder of it was told it was lost
  std::size_t late_acquires = 0;        // neither completed nor failed by deadline + grace
  std::size_t wedged_locks = 0;         // a final try not granted
  std::map<std::string, std::size_t, std::less<>> acquisitions_by_recipe;
  beside_curator curator;
  std::vector<std::string> examples;    // the first few of those, described
};

// Judges the records of every worker. `grace`: how late past its deadline an
// acquire may complete (the scheduling of a loaded machine); an acquire
// without a deadline must complete by `faults_end` + grace. An acquire or a
// hold during which its worker was paused is judged with the pause in mind.
verdict judge(const std::vector<hold_record>& holds, const std::vector<acquire_record>& acquires,
              const std::vector<pause_window>& pauses, ns grace, const std::vector<final_try>& final_tries = {},
              ns faults_end = 0);

}  // namespace zkasio::chaos
