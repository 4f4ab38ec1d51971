#include "chaos/faults.hpp"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/process.hpp"

namespace zkasio::chaos {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

std::string_view name(fault f) {
  switch (f) {
    case fault::pause_server: return "pause_server";
    case fault::kill_server: return "kill_server";
    case fault::kill_leader: return "kill_leader";
    case fault::expire_worker: return "expire_worker";
    case fault::cut_worker: return "cut_worker";
    case fault::pause_worker: return "pause_worker";
    case fault::pause_follower: return "pause_follower";
    case fault::busy_strand: return "busy_strand";
  }
  return "?";
}

namespace {

ns monotonic_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

void signal_process(int pid, int signal) {
  if (::kill(pid, signal) != 0) throw std::runtime_error("cannot signal pid " + std::to_string(pid));
}

}  // namespace

fault_driver::fault_driver(test::zk_servers& servers,
                           std::vector<std::vector<std::unique_ptr<test::tcp_proxy>>>& proxies,
                           std::vector<int> worker_pids, int zkasio_workers, unsigned seed,
                           std::chrono::milliseconds session_timeout,
                           std::function<std::optional<holder>()> long_holder)
    : servers_(servers),
      proxies_(proxies),
      worker_pids_(std::move(worker_pids)),
      zkasio_workers_(zkasio_workers),
      random_(seed),
      session_timeout_(session_timeout),
      long_holder_(std::move(long_holder)) {}

int fault_driver::random_server() { return 1 + static_cast<int>(random_() % static_cast<unsigned>(servers_.count())); }
int fault_driver::random_worker() { return static_cast<int>(random_() % worker_pids_.size()); }

int fault_driver::victim() {
  if (worker_faults_++ % 2 == 0)
    if (auto h = long_holder_(); h && h->worker >= 0 && h->worker < static_cast<int>(worker_pids_.size()))
      return h->worker;
  return random_worker();
}

int fault_driver::holders_follower(std::string& why) {
  std::vector<int> followers;
  for (int i = 1; i <= servers_.count(); ++i)
    if (test::four_letter_word(servers_.host(i), "srvr", 500ms).find("Mode: follower") != std::string::npos)
      followers.push_back(i);
  if (followers.empty()) return 0;
  if (auto h = long_holder_(); h && h->session != 0) {
    std::ostringstream sid;
    sid << "sid=0x" << std::hex << h->session;
    for (int i : followers)
      if (test::four_letter_word(servers_.host(i), "cons", 500ms).find(sid.str()) != std::string::npos) {
        why = " (the long holder's session)";
        return i;
      }
  }
  why = " (the long holder's session not on a follower)";
  return followers[random_() % followers.size()];
}

int fault_driver::leader() {
  for (int i = 1; i <= servers_.count(); ++i)
    if (test::four_letter_word(servers_.host(i), "srvr", 500ms).find("Mode: leader") != std::string::npos) return i;
  return 0;
}

std::chrono::milliseconds fault_driver::longest(fault f) const {
  switch (f) {
    case fault::pause_server: return 3s;
    case fault::kill_server:
    case fault::kill_leader: return 15s;  // a JVM's start, and a leader elected
    case fault::expire_worker:
    case fault::pause_worker: return session_timeout_ + 2s;
    case fault::cut_worker: return 0ms;
    case fault::pause_follower: return session_timeout_ + 3s;
    case fault::busy_strand: return 3s;  // (the worker's: the driver only signals)
  }
  return 0ms;
}

void fault_driver::inject(fault f) {
  auto started = clock::now();
  std::string what;
  switch (f) {
    case fault::pause_server: {
      int i = random_server();
      auto length = std::chrono::milliseconds(100 + random_() % 2901);
      servers_.pause(i);
      std::this_thread::sleep_for(length);  // the fault's length, not a wait for an event
      servers_.resume(i);
      what = "server " + std::to_string(i) + " for " + std::to_string(length.count()) + " ms";
      break;
    }
    case fault::kill_server:
    case fault::kill_leader: {
      int i = f == fault::kill_leader ? leader() : random_server();
      if (i == 0) {  // no leader right now (an election): a server all the same
        i = random_server();
        what = "(no leader) ";
      }
      int pid = servers_.pid(i);
      signal_process(pid, SIGKILL);
      if (!test::await_exit(pid, 10s)) throw std::runtime_error("server " + std::to_string(i) + " survived SIGKILL");
      servers_.restart(i);  // waits until it serves again
      what += "server " + std::to_string(i);
      break;
    }
    case fault::expire_worker: {
      int w = victim();
      for (auto& p : proxies_[w]) p->refuse_connections(true);
      for (auto& p : proxies_[w]) p->drop_now();
      // The server expires a session a tick or two after its timeout.
      std::this_thread::sleep_for(session_timeout_ + 1500ms);
      for (auto& p : proxies_[w]) p->refuse_connections(false);
      what = "worker " + std::to_string(w);
      break;
    }
    case fault::cut_worker: {
      int w = random_worker();
      for (auto& p : proxies_[w]) p->drop_now();
      what = "worker " + std::to_string(w);
      break;
    }
    case fault::pause_follower: {
      std::string why;
      int i = holders_follower(why);
      if (i == 0) {  // no follower answers (an election): a server all the same
        i = random_server();
        why = " (no follower answered)";
      }
      // Past the session timeout: its clients move to the others once they
      // see it silent (two thirds of the timeout), while the leader's sight
      // of their sessions is what this follower reported last.
      auto length = session_timeout_ + std::chrono::milliseconds(random_() % 1501);
      signal_process(servers_.pid(i), SIGSTOP);
      std::this_thread::sleep_for(length);  // the fault's length, not a wait for an event
      signal_process(servers_.pid(i), SIGCONT);
      what = "follower " + std::to_string(i) + why + " for " + std::to_string(length.count()) + " ms";
      break;
    }
    case fault::busy_strand: {
      int w = victim();
      if (w >= zkasio_workers_) w = static_cast<int>(random_() % static_cast<unsigned>(zkasio_workers_));
      signal_process(worker_pids_[w], SIGUSR1);
      what = "worker " + std::to_string(w);
      break;
    }
    case fault::pause_worker: {
      int w = victim();
      auto from = monotonic_now();
      signal_process(worker_pids_[w], SIGSTOP);
      std::this_thread::sleep_for(session_timeout_ + 1500ms);
      signal_process(worker_pids_[w], SIGCONT);
      pauses_.push_back({w, from, monotonic_now()});
      what = "worker " + std::to_string(w);
      break;
    }
  }
  ++injected_[static_cast<std::size_t>(f)];
  std::cout << "fault " << name(f) << ": " << what << " ("
            << std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started).count() << " ms)"
            << std::endl;
}

void fault_driver::run_until(clock::time_point until) {
  std::vector<fault> order(all_faults.begin(), all_faults.end());
  for (bool first = true;; first = false) {
    std::shuffle(order.begin(), order.end(), random_);
    for (auto f : order) {
      // (The first round's gaps short: every kind fits in a run of 60 s,
      // whatever the order: about 38 s of faults and gaps at the most.)
      auto gap = std::chrono::milliseconds(first ? 500 : 500 + random_() % 1501);
      if (clock::now() + gap + longest(f) > until) return;
      std::this_thread::sleep_for(gap);
      inject(f);
    }
  }
}

}  // namespace zkasio::chaos
