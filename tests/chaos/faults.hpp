// The chaos suite's fault driver: one fault at a time, each kind in turn in
// an order drawn from the seed, on a 3-server ensemble and on the workers
// (their connections pass through a proxy per server, so one worker can be
// cut off alone).
#pragma once

#include <array>
#include <cstdint>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chaos/verdict.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

namespace zkasio::chaos {

enum class fault {
  pause_server,    // SIGSTOP a random server for 0.1-3 s
  kill_server,     // SIGKILL a random server, then start it again
  kill_leader,     // the same to the leader
  expire_worker,   // cut a worker off (every connection refused) until its session expired
  cut_worker,      // close a worker's connections once (its session lives)
  pause_worker,    // SIGSTOP a worker past its session timeout, then SIGCONT
  pause_follower,  // SIGSTOP the follower the long holder's session is on (else a random
                   // follower) past the session timeout, while the leader and the other
                   // follower go on: the leader may expire what the follower last answered
  busy_strand,     // SIGUSR1 to a zkasio worker: one of its lock objects' strands kept busy
                   // for 0.1-3 s while its other thread reads the replies
};
inline constexpr std::array all_faults{fault::pause_server,  fault::kill_server,   fault::kill_leader,
                                       fault::expire_worker, fault::cut_worker,    fault::pause_worker,
                                       fault::pause_follower, fault::busy_strand};
std::string_view name(fault f);

class fault_driver {
 public:
  // `proxies[w]`: worker w's proxies, one per server; the first
  // `zkasio_workers` of `worker_pids` are zkasio's (busy_strand signals
  // only those). `long_holder()`: the worker that holds the long-hold lock
  // now, if any, and its session's id: every other fault on a worker hits
  // it, so that holders are caught mid-hold, and pause_follower the
  // follower its session is on.
  struct holder {
    int worker = 0;
    std::int64_t session = 0;
  };
  fault_driver(test::zk_servers& servers, std::vector<std::vector<std::unique_ptr<test::tcp_proxy>>>& proxies,
               std::vector<int> worker_pids, int zkasio_workers, unsigned seed,
               std::chrono::milliseconds session_timeout, std::function<std::optional<holder>()> long_holder);

  // Injects faults until `until` (none that would end after it), with 0.5-2 s
  // between them (0.5 s in the first round, which has every kind).
  void run_until(std::chrono::steady_clock::time_point until);

  const std::array<std::size_t, all_faults.size()>& injected() const { return injected_; }
  const std::vector<pause_window>& pauses() const { return pauses_; }

 private:
  std::chrono::milliseconds longest(fault f) const;  // the most a fault can take
  void inject(fault f);
  int random_server();
  int random_worker();
  int victim();  // of a fault on a worker: the long holder, or one at random
  int leader();  // the server that says it leads; 0 if none does
  // The follower the long holder's session is connected to, else a random
  // follower (0 if none answers).
  int holders_follower(std::string& why);

  test::zk_servers& servers_;
  std::vector<std::vector<std::unique_ptr<test::tcp_proxy>>>& proxies_;
  std::vector<int> worker_pids_;
  int zkasio_workers_;
  std::mt19937 random_;
  std::chrono::milliseconds session_timeout_;
  std::function<std::optional<holder>()> long_holder_;
  std::size_t worker_faults_ = 0;
  std::array<std::size_t, all_faults.size()> injected_{};
  std::vector<pause_window> pauses_;
};

}  // namespace zkasio::chaos
