// The chaos suite's fault driver: one fault at a time, each kind in turn in
// an order drawn from the seed, on a 3-server ensemble and on the workers
// (their connections pass through a proxy per server, so one worker can be
// cut off alone).
#pragma once

#include <array>
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
  pause_server,   // SIGSTOP a random server for 0.1-3 s
  kill_server,    // SIGKILL a random server, then start it again
  kill_leader,    // the same to the leader
  expire_worker,  // cut a worker off (every connection refused) until its session expired
  cut_worker,     // close a worker's connections once (its session lives)
  pause_worker,   // SIGSTOP a worker past its session timeout, then SIGCONT
};
inline constexpr std::array all_faults{fault::pause_server, fault::kill_server, fault::kill_leader,
                                       fault::expire_worker, fault::cut_worker, fault::pause_worker};
std::string_view name(fault f);

class fault_driver {
 public:
  // `proxies[w]`: worker w's proxies, one per server. `long_holder()`: the
  // worker that holds the long-hold lock now, if any: every other fault on
  // a worker hits it, so that holders are caught mid-hold.
  fault_driver(test::zk_servers& servers, std::vector<std::vector<std::unique_ptr<test::tcp_proxy>>>& proxies,
               std::vector<int> worker_pids, unsigned seed, std::chrono::milliseconds session_timeout,
               std::function<std::optional<int>()> long_holder);

  // Injects faults until `until` (none that would end after it), with 0.5-2 s between them.
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

  test::zk_servers& servers_;
  std::vector<std::vector<std::unique_ptr<test::tcp_proxy>>>& proxies_;
  std::vector<int> worker_pids_;
  std::mt19937 random_;
  std::chrono::milliseconds session_timeout_;
  std::function<std::optional<int>()> long_holder_;
  std::size_t worker_faults_ = 0;
  std::array<std::size_t, all_faults.size()> injected_{};
  std::vector<pause_window> pauses_;
};

}  // namespace zkasio::chaos
