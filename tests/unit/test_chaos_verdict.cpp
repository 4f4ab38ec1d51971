// The chaos suite's verdict (tests/chaos/verdict.hpp) on records made up to
// break each rule: it must see two holders at once (by each recipe's rule:
// writers alone, readers together, at most N leases, one leader), tokens out
// of order, late, hung or lost acquires and wedged lock objects, and must
// excuse what a process pause explains; and the servers' transaction logs
// as the driver reads them (logged_deletes.hpp).
#include <doctest/doctest.h>

#include "chaos/logged_deletes.hpp"
#include "chaos/verdict.hpp"

using namespace zkasio::chaos;

namespace {
constexpr ns ms = 1'000'000;
constexpr ns grace = 1000 * ms;
}  // namespace

TEST_CASE("holders one after the other, tokens rising: nothing to report") {
  std::vector<hold_record> holds{{0, 0, 0, 10 * ms, 100, false}, {1, 0, 10 * ms, 20 * ms, 101, false},
                                 {0, 1, 5 * ms, 3000 * ms, 7, true}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.acquisitions == 3);
  CHECK(v.lost_signals == 1);
  CHECK(v.long_holds == 1);
  CHECK(v.overlaps == 0);
  CHECK(v.tokens_out_of_order == 0);
  CHECK(v.examples.empty());
}

TEST_CASE("two holders of one lock at once are an overlap, also across a long earlier hold") {
  // The second hold begins inside the first; the third begins after the
  // second ended but inside the first, which ended last.
  std::vector<hold_record> holds{{0, 0, 0, 100 * ms, 1, false}, {1, 0, 50 * ms, 60 * ms, 2, false},
                                 {2, 0, 70 * ms, 80 * ms, 3, false}, {3, 1, 50 * ms, 60 * ms, 9, false}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.overlaps == 2);
  CHECK(v.examples.size() == 2);
}

TEST_CASE("a later grant with a token not greater is out of order") {
  std::vector<hold_record> holds{{0, 0, 0, 10 * ms, 5, false}, {1, 0, 20 * ms, 30 * ms, 5, false},
                                 {1, 0, 40 * ms, 50 * ms, 4, false}};
  CHECK(judge(holds, {}, {}, grace).tokens_out_of_order == 2);
}

TEST_CASE("a hold during which its process was paused counts up to the pause") {
  // Worker 0 was stopped at 10 ms, its session expired, worker 1 was granted
  // at 7 s; worker 0 woke and saw its loss at 8 s.
  std::vector<hold_record> holds{{0, 0, 0, 8000 * ms, 1, true}, {1, 0, 7000 * ms, 7010 * ms, 2, false}};
  CHECK(judge(holds, {}, {}, grace).overlaps == 1);
  auto v = judge(holds, {}, {{0, 10 * ms, 7900 * ms}}, grace);
  CHECK(v.overlaps == 0);
  CHECK(v.holds_cut_by_pause == 1);
  // A pause of another worker excuses nothing.
  CHECK(judge(holds, {}, {{1, 10 * ms, 7900 * ms}}, grace).overlaps == 1);
}

TEST_CASE("a hold whose lock object's strand was kept busy counts up to that; a busy strand of another lock excuses nothing") {
  // Worker 0's object of lock 0 was kept busy from 10 ms (the busy_strand
  // fault): its lost signal could not reach it, as in a paused process.
  std::vector<hold_record> holds{{0, 0, 0, 8000 * ms, 1, true}, {1, 0, 7000 * ms, 7010 * ms, 2, false}};
  auto v = judge(holds, {}, {{0, 10 * ms, 7900 * ms, 0}}, grace);
  CHECK(v.overlaps == 0);
  CHECK(v.holds_cut_by_pause == 1);
  CHECK(judge(holds, {}, {{0, 10 * ms, 7900 * ms, 1}}, grace).overlaps == 1);
  // Its line reads back as written.
  worker_log log;
  pause_window busy{3, 100 * ms, 2100 * ms, 2};
  parse_line(format(busy), log);
  REQUIRE(log.busy.size() == 1);
  CHECK(log.busy[0].worker == 3);
  CHECK(log.busy[0].lock == 2);
  CHECK(log.busy[0].to == 2100 * ms);
  parse_line("busy 3 -1 5 4", log);  // no lock, or ending before it began
  CHECK(log.bad_lines.size() == 1);
}

TEST_CASE("a grant asked for before its process's pause and seen after it is judged at the pause's start") {
  // Worker 1 asked at 5 ms and was granted (node 5, its third handoff)
  // before it was stopped at 10 ms; it saw the grant on waking at 7.511 s,
  // after worker 0 had been granted node 9 at 7 s. (A chaos run of the
  // in-process handoff under pauses counted this as an overlap and two
  // tokens out of order.)
  auto hold = [](int worker, ns asked, ns grant, ns end, std::int64_t token, std::uint64_t local, bool lost) {
    hold_record h{worker, 0, grant, end, token, lost, recipe::handoff_mutex, false, 1, 1, local};
    h.asked = asked;
    return h;
  };
  std::vector<hold_record> holds{hold(1, 5 * ms, 7511 * ms, 7512 * ms, 5, 3, true),
                                 hold(0, 6000 * ms, 7000 * ms, 7515 * ms, 9, 14, false)};
  std::vector<pause_window> pause{{1, 10 * ms, 7510 * ms}};
  auto before = judge(holds, {}, {}, grace);
  CHECK(before.overlaps == 1);
  CHECK(before.tokens_out_of_order == 1);
  auto v = judge(holds, {}, pause, grace);
  CHECK(v.overlaps == 0);
  CHECK(v.tokens_out_of_order == 0);
  CHECK(v.holds_cut_by_pause == 1);
  // Still judged: the pause is another worker's; the acquire was asked
  // after the pause ended; a grant seen long after waking was decided then.
  CHECK(judge(holds, {}, {{0, 10 * ms, 7510 * ms}}, grace).overlaps == 1);
  auto late_ask = holds;
  late_ask[0].asked = 7510 * ms;
  CHECK(judge(late_ask, {}, pause, grace).overlaps == 1);
  auto late_grant = holds;
  late_grant[0].grant = 7513 * ms;
  late_grant[0].end = 7514 * ms;
  std::vector<pause_window> early_pause{{1, 10 * ms, 5000 * ms}};
  CHECK(judge(late_grant, {}, early_pause, grace).overlaps == 1);
  // A hold over the pause's start still overlaps the grant judged there.
  auto spanning = holds;
  spanning.push_back(hold(2, 1 * ms, 2 * ms, 20 * ms, 4, 0, false));
  CHECK(judge(spanning, {}, pause, grace).overlaps == 1);
  // Decided after the pause (its session outlived it): in order where it was
  // seen, and judged there, though at the pause's start its token would not
  // rise. (A 60 s run counted 2,350 tokens out of order when every such
  // grant was judged at the pause's start.)
  std::vector<hold_record> after{hold(1, 5 * ms, 7511 * ms, 7512 * ms, 12, 0, false),
                                 hold(0, 6000 * ms, 7000 * ms, 7505 * ms, 9, 0, false)};
  auto later = judge(after, {}, pause, grace);
  CHECK(later.overlaps == 0);
  CHECK(later.tokens_out_of_order == 0);
  // Not known when asked (-1): judged where it was seen, as before.
  auto unknown = holds;
  unknown[0].asked = -1;
  CHECK(judge(unknown, {}, pause, grace).overlaps == 1);
}

TEST_CASE("an acquire completing past its deadline and the grace, or never, is late, unless its process was paused") {
  std::vector<acquire_record> acquires{
      {0, 0, 0, 900 * ms, 1000 * ms, "ok"},                  // in time
      {0, 0, 0, 1900 * ms, 1000 * ms, "lock_timeout"},       // within the grace
      {1, 0, 0, 2100 * ms, 1000 * ms, "lock_timeout"},       // late
      {2, 1, 0, std::nullopt, 1000 * ms, "pending"},          // never completed
      {3, 1, 0, 9000 * ms, 1000 * ms, "session_expired"},    // late, but its worker was paused
  };
  auto v = judge({}, acquires, {{3, 500 * ms, 8000 * ms}}, grace);
  CHECK(v.late_acquires == 2);
  CHECK(v.acquire_failures == 4);
}

namespace {
hold_record shared_hold(int worker, ns grant, ns end, bool reader) {
  return {worker, 0, grant, end, 0, false, recipe::shared_mutex, reader};
}
hold_record leases_hold(int worker, ns grant, ns end, int leases, int capacity) {
  return {worker, 0, grant, end, 0, false, recipe::semaphore, false, leases, capacity};
}
}  // namespace

TEST_CASE("shared_mutex: readers together are legal; two writers, or a writer beside a reader, overlap") {
  CHECK(judge({shared_hold(0, 0, 100 * ms, true), shared_hold(1, 10 * ms, 90 * ms, true)}, {}, {}, grace).overlaps == 0);
  CHECK(judge({shared_hold(0, 0, 100 * ms, false), shared_hold(1, 10 * ms, 90 * ms, false)}, {}, {}, grace).overlaps ==
        1);
  CHECK(judge({shared_hold(0, 0, 100 * ms, true), shared_hold(1, 10 * ms, 90 * ms, false)}, {}, {}, grace).overlaps == 1);
  CHECK(judge({shared_hold(0, 0, 100 * ms, false), shared_hold(1, 10 * ms, 90 * ms, true)}, {}, {}, grace).overlaps == 1);
  // Their tokens need not rise: holders share the lock.
  CHECK(judge({shared_hold(0, 0, 100 * ms, true), shared_hold(1, 10 * ms, 90 * ms, true)}, {}, {}, grace)
            .tokens_out_of_order == 0);
}

TEST_CASE("semaphore: N leases at once are legal, N + 1 overlap") {
  std::vector<hold_record> three_of_three{leases_hold(0, 0, 100 * ms, 2, 3), leases_hold(1, 10 * ms, 90 * ms, 1, 3)};
  CHECK(judge(three_of_three, {}, {}, grace).overlaps == 0);
  auto four_of_three = three_of_three;
  four_of_three.push_back(leases_hold(2, 20 * ms, 30 * ms, 1, 3));
  CHECK(judge(four_of_three, {}, {}, grace).overlaps == 1);
  // A lease freed makes room again.
  three_of_three.push_back(leases_hold(2, 95 * ms, 120 * ms, 1, 3));
  CHECK(judge(three_of_three, {}, {}, grace).overlaps == 0);
}

TEST_CASE("election: two leaders at once overlap; each term's token must rise") {
  std::vector<hold_record> terms{{0, 0, 0, 100 * ms, 4, false, recipe::election_fair},
                                 {1, 0, 50 * ms, 150 * ms, 5, false, recipe::election_fair},
                                 {2, 0, 200 * ms, 300 * ms, 5, false, recipe::election_fair}};
  auto v = judge(terms, {}, {}, grace);
  CHECK(v.overlaps == 1);
  CHECK(v.tokens_out_of_order == 1);
  CHECK(v.acquisitions_by_recipe.at("election_fair") == 3);
}

TEST_CASE("handoff_mutex: grants on one node rise by their local count; a count not greater is out of order") {
  auto handed = [](int worker, ns grant, std::int64_t czxid, std::uint64_t local) {
    return hold_record{worker, 0, grant, grant + 5 * ms, czxid, false, recipe::handoff_mutex, false, 1, 1, local};
  };
  // Node 7's run of three grants, then node 9's.
  std::vector<hold_record> run{handed(0, 0, 7, 0), handed(0, 10 * ms, 7, 1), handed(0, 20 * ms, 7, 2),
                               handed(1, 30 * ms, 9, 0)};
  CHECK(judge(run, {}, {}, grace).tokens_out_of_order == 0);
  run.push_back(handed(0, 40 * ms, 9, 0));  // the same pair again
  run.push_back(handed(0, 50 * ms, 7, 3));  // an older node's
  auto v = judge(run, {}, {}, grace);
  CHECK(v.tokens_out_of_order == 2);
  CHECK(v.acquisitions_by_recipe.at("handoff_mutex") == 6);
}

TEST_CASE("an acquire without a deadline must complete once the faults stop: else it hung") {
  constexpr ns faults_end = 60'000 * ms;
  std::vector<acquire_record> acquires{
      {0, 0, 0, 60'500 * ms, -1, "ok"},          // completed within the grace after the faults
      {1, 0, 0, 62'000 * ms, -1, "ok"},          // hung past it
      {2, 0, 0, std::nullopt, -1, "pending"},    // never completed
  };
  CHECK(judge({}, acquires, {}, grace, {}, faults_end).late_acquires == 2);
}

TEST_CASE("a free lock object not granted at the last try is wedged") {
  std::vector<final_try> tries{{0, 0, true}, {0, 1, false}, {1, 0, true}};
  auto v = judge({}, {}, {}, grace, tries);
  CHECK(v.wedged_locks == 1);
  CHECK(v.examples.size() == 1);
}

TEST_CASE("log lines read back as written; a line it cannot read is set apart") {
  worker_log log;
  hold_record h{2, 1, 123, 456, 789, true, recipe::semaphore, false, 2, 3};
  hold_record reader{1, 0, 1, 2, 3, false, recipe::shared_mutex, true};
  hold_record handed{1, 0, 1, 2, 3, false, recipe::handoff_mutex, false, 1, 1, 17, false, 0};
  acquire_record a{2, 1, 100, 200, 300, "ok"}, pending{3, 0, 100, std::nullopt, 300, "pending"};
  parse_line(format(h), log);
  parse_line(format(reader), log);
  parse_line(format(handed), log);
  parse_line(format(final_try{2, 1, false}), log);
  parse_line(format(a), log);
  parse_line(format(pending), log);
  parse_line("orphans 2 0", log);
  parse_line("leaked 4 2", log);
  parse_line("leaked 4 1", log);
  parse_line("leaked 4 -1", log);
  parse_line("hold 1 2 3", log);
  parse_line("acquire 1 2 3 4x 5 ok", log);
  parse_line("hold 1 2 3 4 5 0 0 mutex write 1 1 extra", log);
  parse_line("hold 1 2 3 4 5 0 0 unknown_recipe write 1 1", log);
  parse_line("hold 1 2 3 4 5 0 mutex write 1 1", log);  // without LOCAL
  parse_line("final 1 2 maybe", log);
  parse_line("something else", log);
  REQUIRE(log.holds.size() == 3);
  CHECK(log.holds[0].token == 789);
  CHECK(log.holds[0].lost);
  CHECK(log.holds[0].kind == recipe::semaphore);
  CHECK(log.holds[0].leases == 2);
  CHECK(log.holds[0].capacity == 3);
  CHECK(log.holds[1].reader);
  CHECK(log.holds[2].kind == recipe::handoff_mutex);
  CHECK(log.holds[2].local == 17);
  CHECK(log.holds[2].asked == 0);
  CHECK(log.holds[0].asked == -1);
  REQUIRE(log.final_tries.size() == 1);
  CHECK_FALSE(log.final_tries[0].granted);
  REQUIRE(log.acquires.size() == 2);
  CHECK(log.acquires[0].end == 200);
  CHECK_FALSE(log.acquires[1].end);
  CHECK(log.orphans == 0);
  CHECK(log.leaked == 3);
  CHECK(log.bad_lines.size() == 8);
  CHECK(recipe_named("election_race") == recipe::election_race);
  CHECK_FALSE(recipe_named("unknown_recipe"));
}

TEST_CASE("beside Curator: what involves a Curator worker is counted apart, zkasio's own pairs still must be zero") {
  auto curator = [](hold_record h) {
    h.curator = true;
    return h;
  };
  // A zkasio hold granted inside a Curator hold (and the reverse), tokens out
  // of order next to a Curator grant: Curator's figures.
  std::vector<hold_record> holds{curator({9, 0, 0, 100 * ms, 50, false}), {0, 0, 50 * ms, 60 * ms, 40, false},
                                 curator({9, 1, 0, 10 * ms, 7, false}), {0, 1, 20 * ms, 30 * ms, 8, false}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.overlaps == 0);
  CHECK(v.tokens_out_of_order == 0);
  CHECK(v.curator.overlaps == 1);
  CHECK(v.curator.tokens_out_of_order == 1);
  CHECK(v.acquisitions == 2);
  CHECK(v.curator.acquisitions == 2);
  // Two zkasio holders at once beside a Curator holder: zkasio's overlap.
  holds.push_back({1, 0, 55 * ms, 58 * ms, 41, false});
  v = judge(holds, {}, {}, grace);
  CHECK(v.overlaps == 1);
  CHECK(v.curator.overlaps == 1);
  // A Curator acquire late, a Curator lock refused at the last try.
  acquire_record late{9, 0, 0, 5000 * ms, 1000 * ms, "ok"};
  late.curator = true;
  final_try refused{9, 0, false};
  refused.curator = true;
  v = judge({}, {late}, {}, grace, {refused});
  CHECK(v.late_acquires == 0);
  CHECK(v.wedged_locks == 0);
  CHECK(v.curator.late_acquires == 1);
  CHECK(v.curator.wedged_locks == 1);
}

TEST_CASE("a grant of a node after its holder was told it was lost is a grant after a loss") {
  // The hold of node 7 lost at 10 ms; the node handed over in memory at 20 ms
  // (a grant of the same token): that grant came after the loss.
  std::vector<hold_record> holds{{0, 0, 0, 10 * ms, 7, true}, {0, 0, 20 * ms, 30 * ms, 7, false}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.grants_after_loss == 1);
  // Handed over before the loss was told: none.
  holds = {{0, 0, 0, 10 * ms, 7, false}, {0, 0, 10 * ms, 30 * ms, 7, true}};
  CHECK(judge(holds, {}, {}, grace).grants_after_loss == 0);
  // Another node's grant after a loss: none.
  holds = {{0, 0, 0, 10 * ms, 7, true}, {1, 0, 20 * ms, 30 * ms, 8, false}};
  CHECK(judge(holds, {}, {}, grace).grants_after_loss == 0);
}

TEST_CASE("an acquire without a deadline is due once the faults stopped and the acquires with one (or Curator's) left its lock") {
  // On lock 0 an acquire with a deadline (a semaphore's, holding its mutex
  // while it waits for room) and a Curator acquire (past its deadline)
  // were there until 3 s and 4 s past the faults' end: zkasio's acquire
  // without a deadline, granted 4.5 s past it, is not late; on lock 1 it is.
  ns faults_end = 1000 * ms;
  acquire_record bounded{1, 0, 0, 4000 * ms, 4000 * ms, "lock_timeout"};
  acquire_record curator{9, 0, 0, 5000 * ms, 1000 * ms, "timeout"};
  curator.curator = true;
  acquire_record zk{0, 0, 500 * ms, 5500 * ms, -1, "ok"};
  auto v = judge({}, {bounded, curator, zk}, {}, grace, {}, faults_end);
  CHECK(v.late_acquires == 0);
  CHECK(v.curator.late_acquires == 1);
  zk.lock = 1;
  CHECK(judge({}, {bounded, curator, zk}, {}, grace, {}, faults_end).late_acquires == 1);
  // Never completed: late whatever was ahead.
  zk.lock = 0;
  zk.end.reset();
  CHECK(judge({}, {bounded, curator, zk}, {}, grace, {}, faults_end).late_acquires == 1);
}

TEST_CASE("beside Curator: a zkasio token regression is caught across a Curator grant; Curator's unknown token (0) is compared with nothing") {
  auto curator = [](hold_record h) {
    h.curator = true;
    return h;
  };
  // zkasio 100, Curator 105, zkasio 90: zkasio's own regression.
  std::vector<hold_record> holds{{0, 0, 0, 10 * ms, 100, false}, curator({9, 0, 20 * ms, 30 * ms, 105, false}),
                                 {1, 0, 40 * ms, 50 * ms, 90, false}};
  auto v = judge(holds, {}, {}, grace);
  CHECK(v.tokens_out_of_order == 1);
  // The same with Curator's token unknown.
  holds[1].token = 0;
  v = judge(holds, {}, {}, grace);
  CHECK(v.tokens_out_of_order == 1);
  CHECK(v.curator.tokens_out_of_order == 0);
}

TEST_CASE("beside Curator: a lost Curator hold keys no grant after a loss (its token may be another's node)") {
  // Curator's token looked up after a fault names zkasio's node 7, and its
  // hold ended lost; zkasio's grant of node 7 afterwards is no loss of its own.
  hold_record curators{9, 0, 0, 10 * ms, 7, true};
  curators.curator = true;
  std::vector<hold_record> holds{curators, {0, 0, 20 * ms, 30 * ms, 7, false}};
  CHECK(judge(holds, {}, {}, grace).grants_after_loss == 0);
}

TEST_CASE("an acquire without a deadline is not excused by acquires that started after it and after the faults (final tries)") {
  ns faults_end = 1000 * ms;
  // A hung 20 s past the faults; a final try queued behind it, granted just after it.
  acquire_record a{0, 0, 500 * ms, 21000 * ms, -1, "ok"};
  acquire_record final_try_behind{1, 0, 2000 * ms, 21100 * ms, 33000 * ms, "ok"};
  CHECK(judge({}, {a, final_try_behind}, {}, grace, {}, faults_end).late_acquires == 1);
}

namespace {

// A transaction log as a server writes it (FileTxnLog; logged_deletes.cpp
// says the layout): the header, the records, the preallocated zeros.
struct txn_log_writer {
  std::string bytes = std::string("ZKLG") + std::string(12, '\0');
  static void int32(std::string& out, std::int32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((static_cast<std::uint32_t>(v) >> shift) & 0xff);
  }
  static std::string path_record(const std::string& path) {
    std::string r;
    int32(r, static_cast<std::int32_t>(path.size()));
    return r + path;
  }
  void txn(std::int32_t type, const std::string& record) {
    std::string t(28, '\x01');  // client id, cxid, zxid, time
    int32(t, type);
    t += record + std::string(9, '\x07');  // (and a digest, skipped)
    bytes += std::string(8, '\x05');        // its checksum
    int32(bytes, static_cast<std::int32_t>(t.size()));
    bytes += t + 'B';
  }
};

}  // namespace

TEST_CASE("a transaction log read back: its deletes, a multi's too, and where a record still being written begins") {
  txn_log_writer log;
  log.txn(15, log.path_record("/l/created"));  // a create2: no delete
  log.txn(2, log.path_record("/l/a"));
  std::string multi;
  txn_log_writer::int32(multi, 2);
  for (auto& [type, path] : std::vector<std::pair<std::int32_t, std::string>>{{1, "/l/made"}, {2, "/l/b"}}) {
    txn_log_writer::int32(multi, type);
    auto op = txn_log_writer::path_record(path);
    txn_log_writer::int32(multi, static_cast<std::int32_t>(op.size()));
    multi += op;
  }
  log.txn(14, multi);
  auto whole = log.bytes.size();
  log.txn(2, log.path_record("/l/c"));
  auto scan = scan_txn_log(log.bytes + std::string(64, '\0'), true);
  CHECK(scan.deleted == std::vector<std::string>{"/l/a", "/l/b", "/l/c"});
  CHECK(scan.consumed == log.bytes.size());
  CHECK(scan.at_zeros);
  // The last record cut short (the server still writing it): read up to it,
  // then from there once it is whole.
  auto cut = scan_txn_log(std::string_view(log.bytes).substr(0, log.bytes.size() - 3), true);
  CHECK(cut.deleted == std::vector<std::string>{"/l/a", "/l/b"});
  CHECK(cut.consumed == whole);
  CHECK_FALSE(cut.at_zeros);
  CHECK(scan_txn_log(std::string_view(log.bytes).substr(whole), false).deleted == std::vector<std::string>{"/l/c"});
}
