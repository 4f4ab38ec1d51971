// Latency samples and the benchmark's report (a table, or one JSON object).
#pragma once

#include <chrono>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace zkasio::bench {

using clock = std::chrono::steady_clock;

class latency {
 public:
  void add(clock::duration d) { samples_us_.push_back(std::chrono::duration<double, std::micro>(d).count()); }
  std::size_t count() const { return samples_us_.size(); }
  double percentile(double p) const;  // in microseconds
  std::string json() const;           // {"p50":…, "p90":…, "p99":…, "max":…, "n":…}
  const std::vector<double>& samples_us() const { return samples_us_; }
  void merge(const latency& other) {
    samples_us_.insert(samples_us_.end(), other.samples_us_.begin(), other.samples_us_.end());
  }

 private:
  std::vector<double> samples_us_;
};

// What a subcommand reports: latencies, then plain values (numbers, booleans),
// each in the order added.
struct report {
  std::deque<std::pair<std::string, latency>> latencies;  // entry() references stay valid
  std::vector<std::pair<std::string, std::string>> values;  // as JSON text
  bool sound = true;  // false when the run saw the lock misbehave
};

latency& entry(report& r, const std::string& key);
void add_value(report& r, const std::string& key, double value);
void add_value(report& r, const std::string& key, bool value);
// Each latency's samples to DIR/<key>.txt, one per line (microseconds).
void write_samples(const report& r, const std::string& dir);

// What floor and ops both report, under the same keys.
struct operation_latencies {
  explicit operation_latencies(report& r)
      : create(entry(r, "create")),
        get_children(entry(r, "get_children")),
        exists(entry(r, "exists")),
        remove(entry(r, "delete")),
        notify(entry(r, "notify")),
        pipelined(entry(r, "pipelined_create_get_children")) {}
  latency &create, &get_children, &exists, &remove, &notify, &pipelined;
};
void print(const report& r, bool json);
std::string json_object(const report& r);
void merge(report& into, const report& from);

struct options {
  std::string hosts;
  int rounds = 200;
  int batches = 5;
  int contenders = 4;
  int sessions = 1;
  double seconds = 3;
  int hold_us = 0;
  int waiters = 100;
  int locks = 1;
  int acquisitions = 10'000;  // soak
  int cut_every_ms = 3000;    // soak
  int threads = 4;            // global-lock
  std::string recipe = "mutex";  // handoff: mutex, rw (write lock) or semaphore (one lease)
  int processes = 1;             // handoff: its two players in 1 or 2 processes
  int local_handoff = -1;        // throughput: max_run of the mutexes' local_handoff (-1: off)
  int max_time_ms = 50;          // throughput: its max_time
  bool foreign = false;          // throughput: one more contender, on a session of its own
  std::string waiter = "coroutine";  // scale: each waiter a coroutine or plain completion handlers
  std::string samples_dir;  // empty: none written
  bool json = false;
};

report run_floor(const options& o);
report run_ops(const options& o);
report run_handoff(const options& o);
report run_uncontended(const options& o);
report run_throughput(const options& o);
report run_read_heavy(const options& o);
report run_scale(const options& o);
report run_soak(const options& o);
report run_global_lock(const options& o);
report run_herd(const options& o);  // --recipe mutex or race; sessions = waiters + 1  // values["granted"] == waiters, ["in_order"] true when sound
// floor and ops in alternating batches (machine noise hits both alike), then
// both reports and the ratio of their p50s.
void run_ops_vs_floor(const options& o);

}  // namespace zkasio::bench
