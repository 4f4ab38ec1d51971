// The locks across processes: zkasio processes, and zkasio beside Apache
// Curator's InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2
// and LeaderLatch (Debian's Curator 5.4), on one path. Every holder logs "enter" and "exit" while holding;
// overlapping holders show as an enter that does not follow an exit (for the
// read/write lock: a writer's enter while anyone holds, a reader's while a
// writer holds).
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "support/java_program.hpp"
#include "support/process.hpp"
#include "support/session_test.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;
using namespace std::chrono_literals;

namespace {

struct contender {
  std::vector<std::string> argv;
  std::string name;
};

// Runs the contenders together and checks that all exit 0.
void run_all(const std::vector<contender>& contenders) {
  std::vector<int> pids;
  for (auto& c : contenders) pids.push_back(spawn(c.argv));
  for (std::size_t i = 0; i < pids.size(); ++i) {
    CAPTURE(contenders[i].name);
    CHECK(wait_child(pids[i], 240s) == 0);
  }
}

// Runs the contenders together; checks that the log shows one holder at a
// time and `rounds` grants for each.
void run_contenders(const std::vector<contender>& contenders, const std::string& log, int rounds) {
  run_all(contenders);
  std::ifstream in(log);
  std::map<std::string, int> grants;
  std::string holder, line;
  int overlaps = 0, lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    std::istringstream words(line);
    std::string what, who;
    words >> what >> who;
    if (what == "enter") {
      if (!holder.empty()) ++overlaps;
      holder = who;
      ++grants[who];
    } else if (what == "exit") {
      if (holder != who) ++overlaps;
      holder.clear();
    }
  }
  CHECK(overlaps == 0);
  CHECK(lines == static_cast<int>(contenders.size()) * rounds * 2);
  for (auto& c : contenders) {
    CAPTURE(c.name);
    CHECK(grants[c.name] == rounds);
  }
}

// What a read/write lock's log shows: "enter MODE NAME" / "exit MODE NAME"
// (a semaphore's: MODE "lease", counted as readers).
struct read_write_log {
  int violations = 0;     // a writer beside anyone, a reader beside a writer
  int most_readers = 0;   // readers holding at once, at most
  int mixed_readers = 0;  // grants of a reader while a reader of the other kind held
  std::map<std::string, int> grants;
  int lines = 0;
};
// A writer's, a mutex's, a leader's and a race lock's hold exclude every other.
bool exclusive(const std::string& mode) {
  return mode == "write" || mode == "mutex" || mode == "leader" || mode == "race" || mode == "race-leader";
}

read_write_log read_write_log_of(const std::string& log) {
  read_write_log result;
  std::ifstream in(log);
  std::set<std::string> readers;
  std::string writer, line;
  auto kind = [](const std::string& name) { return name.substr(0, name.find('-')); };
  while (std::getline(in, line)) {
    ++result.lines;
    std::istringstream words(line);
    std::string what, mode, who;
    words >> what >> mode >> who;
    if (what == "enter") {
      ++result.grants[who];
      if (!writer.empty() || (exclusive(mode) && !readers.empty())) ++result.violations;
      if (exclusive(mode)) {
        writer = who;
      } else {
        for (auto& r : readers) result.mixed_readers += kind(r) != kind(who);
        readers.insert(who);
        result.most_readers = std::max(result.most_readers, static_cast<int>(readers.size()));
      }
    } else if (what == "exit") {
      if (exclusive(mode) ? writer != who : readers.erase(who) != 1) ++result.violations;
      if (exclusive(mode)) writer.clear();
    }
  }
  return result;
}

std::string temp_log(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() /
              ("zkasio-" + name + "-" + std::to_string(getpid()) + ".log");
  std::filesystem::remove(path);
  return path.string();
}

}  // namespace

TEST_CASE("mutual exclusion across 6 processes") {
  auto log = temp_log("processes");
  auto path = unique_path("mutex-processes");
  constexpr int rounds = 200;
  std::vector<contender> contenders;
  for (int i = 0; i < 6; ++i) {
    auto name = "zkasio-" + std::to_string(i);
    contenders.push_back({{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, name,
                           std::to_string(rounds), log},
                          name});
  }
  run_contenders(contenders, log, rounds);
  std::filesystem::remove(log);
}

TEST_CASE("Curator's InterProcessMutex and zkasio exclude each other on one path" * doctest::test_suite("interop")) {
  java_program curator("tests/interop/CuratorContender.java", "CuratorContender");
  auto log = temp_log("interop");
  auto path = unique_path("mutex-interop");
  constexpr int rounds = 30;
  std::vector<contender> contenders;
  for (int i = 0; i < 2; ++i) {
    auto zk = "zkasio-" + std::to_string(i), other = "curator-" + std::to_string(i);
    contenders.push_back({{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, zk, std::to_string(rounds), log}, zk});
    contenders.push_back({curator.with({shared_hosts(), path, other, std::to_string(rounds), log}), other});
  }
  run_contenders(contenders, log, rounds);
  std::filesystem::remove(log);
}

// zkasio processes on one path, one per mode of `modes` (lock_order's), each
// taking its lock `rounds` times: all exit 0, each with its rounds in the
// log, and nobody beside an exclusive holder.
read_write_log run_modes(const std::string& name, const std::vector<std::string>& modes, int rounds) {
  auto log = temp_log(name);
  auto path = unique_path(name);
  std::vector<contender> contenders;
  for (auto& mode : modes) {
    auto who = "zkasio-" + std::to_string(contenders.size());
    contenders.push_back({{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, who, std::to_string(rounds), log, mode}, who});
  }
  run_all(contenders);
  auto seen = read_write_log_of(log);
  CHECK(seen.violations == 0);
  CHECK(seen.lines == static_cast<int>(contenders.size()) * rounds * 2);
  for (auto& c : contenders) CHECK(seen.grants[c.name] == rounds);
  std::filesystem::remove(log);
  return seen;
}

TEST_CASE("the race recipes across 4 processes: race mutexes and race-mode elections on one node, one holder at a time") {
  run_modes("race-processes", {"race", "race", "race-leader", "race-leader"}, 40);
}

TEST_CASE("the read/write lock across 4 processes: writers exclude everyone, readers share") {
  auto seen = run_modes("read-write-processes", {"read", "read", "read", "write"}, 60);
  CHECK(seen.most_readers >= 2);  // they did share
}

// Starts Curator's contenders, runs `zkasio()` once each of them has held
// the lock (a JVM starts slowly), then waits for them to exit 0.
template <class Zkasio>
void run_beside_curators(const std::vector<contender>& curators, const std::string& log, Zkasio zkasio) {
  std::vector<int> curator_pids;
  for (auto& c : curators) curator_pids.push_back(spawn(c.argv));
  auto all_held = [&] {
    auto seen = read_write_log_of(log);
    return std::all_of(curators.begin(), curators.end(), [&](auto& c) { return seen.grants[c.name] > 0; });
  };
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!all_held() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);  // polls a file
  CHECK(all_held());
  zkasio();
  for (std::size_t i = 0; i < curator_pids.size(); ++i) {
    CAPTURE(curators[i].name);
    CHECK(wait_child(curator_pids[i], 240s) == 0);
  }
}

// Curator's contenders first (they run longer: a JVM starts slowly); the
// zkasio ones once every Curator contender has held the lock. Checks that
// all exit 0, each with its rounds in the log, and nobody beside a writer.
read_write_log run_curator_first(const std::vector<contender>& curators, int curator_rounds,
                                 const std::vector<contender>& zkasios, int zkasio_rounds, const std::string& log) {
  run_beside_curators(curators, log, [&] { run_all(zkasios); });
  auto seen = read_write_log_of(log);
  CHECK(seen.violations == 0);
  for (auto& c : curators) CHECK(seen.grants[c.name] == curator_rounds);
  for (auto& c : zkasios) CHECK(seen.grants[c.name] == zkasio_rounds);
  CHECK(seen.lines == 2 * static_cast<int>(curators.size() * curator_rounds + zkasios.size() * zkasio_rounds));
  return seen;
}

// For each of `modes`, a Curator and a zkasio contender (the same command
// line) in that mode, all on one path, Curator's first (see run_curator_first).
read_write_log interop(const java_program& curator, const std::string& name, const std::vector<std::string>& modes,
                       int curator_rounds, int zkasio_rounds) {
  auto log = temp_log(name);
  auto path = unique_path(name);
  std::vector<contender> curators, zkasios;
  for (std::size_t i = 0; i < modes.size(); ++i) {
    auto& mode = modes[i];
    auto zk = "zkasio-" + std::to_string(i), other = "curator-" + std::to_string(i);
    zkasios.push_back({{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, zk, std::to_string(zkasio_rounds), log, mode}, zk});
    curators.push_back({curator.with({shared_hosts(), path, other, std::to_string(curator_rounds), log, mode}), other});
  }
  auto seen = run_curator_first(curators, curator_rounds, zkasios, zkasio_rounds, log);
  std::filesystem::remove(log);
  return seen;
}

TEST_CASE("Curator's InterProcessReadWriteLock and zkasio's shared_mutex on one path" * doctest::test_suite("interop")) {
  java_program curator("tests/interop/CuratorContender.java", "CuratorContender");
  // Writers of both kinds exclude everyone. (With a writer of each kind the
  // fair queue may settle into a cycle of one kind's readers, its writer, the
  // other kind's readers: that zkasio and Curator readers share is shown
  // next, with readers only.)
  interop(curator, "read-write-interop", {"read", "read", "write"}, 150, 40);
  auto readers = interop(curator, "read-interop", {"read", "read"}, 100, 40);
  MESSAGE("readers at once at most: " << readers.most_readers << "; zkasio and Curator readers together: "
                                       << readers.mixed_readers << " times");
  CHECK(readers.mixed_readers > 0);  // zkasio and Curator readers did share
}

TEST_CASE("Curator's InterProcessSemaphoreV2 and zkasio's semaphore share N leases" * doctest::test_suite("interop")) {
  java_program curator("tests/interop/CuratorContender.java", "CuratorContender");
  constexpr int leases = 2;
  auto lease = "lease-" + std::to_string(leases);
  auto seen = interop(curator, "semaphore-interop", {lease, lease, lease}, 40, 15);
  MESSAGE("leases held at once at most: " << seen.most_readers << "; by zkasio and Curator together: "
                                           << seen.mixed_readers << " times");
  CHECK(seen.most_readers == leases);  // never more, and reached
  CHECK(seen.mixed_readers > 0);
}

TEST_CASE("Curator's LeaderLatch and zkasio's election elect one leader at a time on one path" * doctest::test_suite("interop")) {
  java_program curator("tests/interop/CuratorContender.java", "CuratorContender");
  interop(curator, "leader-interop", {"leader", "leader", "leader"}, 40, 15);
}

TEST_CASE("Curator's InterProcessMutex beside a zkasio mutex handing over in memory: Curator takes turns within the bound" *
          doctest::test_suite("interop")) {
  // 16 coroutines of one zkasio process loop on one mutex with local_handoff
  // (max_run 2): unbounded, their run would keep the node until they are all
  // done. Curator's contenders must take turns while they are not.
  java_program curator("tests/interop/CuratorContender.java", "CuratorContender");
  auto log = temp_log("local-interop");
  auto path = unique_path("local-interop");
  constexpr int curator_rounds = 60, zkasio_rounds = 40, coroutines = 16;
  std::vector<contender> curators;
  for (int i = 0; i < 2; ++i) {
    auto name = "curator-" + std::to_string(i);
    curators.push_back({curator.with({shared_hosts(), path, name, std::to_string(curator_rounds), log, "mutex"}), name});
  }
  contender local{{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, "zkasio", std::to_string(zkasio_rounds), log,
                   "local-" + std::to_string(coroutines)},
                  "zkasio"};
  run_beside_curators(curators, log, [&] { run_all({local}); });
  auto seen = read_write_log_of(log);
  CHECK(seen.violations == 0);
  for (auto& c : curators) CHECK(seen.grants[c.name] == curator_rounds);
  for (int i = 0; i < coroutines; ++i) CHECK(seen.grants["zkasio." + std::to_string(i)] == zkasio_rounds);
  // Curator's grants while zkasio's contenders were still at it, and the
  // longest run of zkasio grants between two of Curator's while both were.
  std::vector<bool> by_zkasio;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("enter")) by_zkasio.push_back(line.find(" zkasio.") != std::string::npos);
  auto first = std::find(by_zkasio.begin(), by_zkasio.end(), true);
  auto last = std::min(std::find(by_zkasio.rbegin(), by_zkasio.rend(), true).base(),
                       std::find(by_zkasio.rbegin(), by_zkasio.rend(), false).base());
  int curator_between = 0, streak = 0, longest = 0;
  for (auto it = first; it < last; ++it) {
    streak = *it ? streak + 1 : 0;
    longest = std::max(longest, streak);
    curator_between += !*it;
  }
  MESSAGE("Curator's grants while zkasio's contenders ran: " << curator_between
                                                             << "; most zkasio grants in a row meanwhile: " << longest);
  CHECK(curator_between >= 20);
  // (Measured 4 to 7 with max_run 2: Curator's own turnaround between a
  // release and its next node is in it. Unbounded it would be hundreds.)
  CHECK(longest <= 160);
  std::filesystem::remove(log);
}

namespace {

// A line of the leader example's job file: "<pid> <fencing token> <ns>".
struct job_run {
  int pid = 0;
  long long token = 0, at = 0;
};
std::vector<job_run> job_runs(const std::string& file) {
  std::vector<job_run> runs;
  std::ifstream in(file);
  for (job_run r; in >> r.pid >> r.token >> r.at;) runs.push_back(r);
  return runs;
}
long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
// Waits (polling the file, at most `limit`) until `holds(runs)`.
template <class Predicate>
bool job_file_shows(const std::string& file, Predicate holds, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!holds(job_runs(file))) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

}  // namespace

TEST_CASE("the leader example: 3 schedulers; the leader killed, another leads within the session timeout plus one second; the job never runs in two at once") {
  auto jobs = temp_log("leader-jobs");
  auto path = unique_path("leader-example");
  constexpr auto session_timeout = 2000ms;
  std::vector<std::unique_ptr<process_guard>> guards;  // ends them, also on failure
  std::vector<int> pids;
  for (int i = 0; i < 3; ++i) {
    pids.push_back(spawn({ZKASIO_LEADER_EXAMPLE, shared_hosts(), path, jobs, std::to_string(session_timeout.count())}));
    guards.push_back(std::make_unique<process_guard>(pids.back()));
  }
  REQUIRE(job_file_shows(jobs, [](auto runs) { return runs.size() >= 3; }, 30s));
  int first = job_runs(jobs).back().pid;
  REQUIRE(std::find(pids.begin(), pids.end(), first) != pids.end());
  auto killed_at = now_ns();
  REQUIRE(::kill(first, SIGKILL) == 0);
  CHECK(wait_child(first, 10s) == 128 + SIGKILL);
  auto next_leads = [&](auto runs) {
    return std::any_of(runs.begin(), runs.end(), [&](auto& r) { return r.pid != first; }) &&
           runs.back().pid != first && std::count_if(runs.begin(), runs.end(), [&](auto& r) { return r.pid != first; }) >= 3;
  };
  REQUIRE(job_file_shows(jobs, next_leads, session_timeout + 10s));
  auto runs = job_runs(jobs);
  auto taken_over = std::find_if(runs.begin(), runs.end(), [&](auto& r) { return r.pid != first; });
  MESSAGE("the next leader's first job ran " << (taken_over->at - killed_at) / 1'000'000 << " ms after the kill");
  CHECK(taken_over->at - killed_at < std::chrono::nanoseconds(session_timeout + 1s).count());
  // The others end by SIGTERM, resigning.
  for (int pid : pids)
    if (pid != first) {
      ::kill(pid, SIGTERM);
      CHECK(wait_child(pid, 20s) == 0);
    }
  // One leader at a time: each term (fencing token) is one process's, and
  // the terms follow each other in time with growing tokens.
  runs = job_runs(jobs);
  std::map<long long, std::pair<long long, long long>> terms;  // token: first and last run
  std::map<long long, std::set<int>> term_pids;
  for (auto& r : runs) {
    auto [it, fresh] = terms.try_emplace(r.token, r.at, r.at);
    it->second.second = std::max(it->second.second, r.at);
    it->second.first = std::min(it->second.first, r.at);
    term_pids[r.token].insert(r.pid);
  }
  CHECK(terms.size() >= 2);
  long long previous_end = 0;
  for (auto& [token, span] : terms) {
    CAPTURE(token);
    CHECK(term_pids[token].size() == 1);
    CHECK(span.first > previous_end);  // (in token order: the later term began after the earlier ended)
    previous_end = span.second;
  }
  std::filesystem::remove(jobs);
}
