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
  void merge(const latency& other) {
    samples_us_.insert(samples_us_.end(), other.samples_us_.begin(), other.samples_us_.end());
  }

 private:
  std::vector<double> samples_us_;
};

// Keys in the order they are reported.
using report = std::deque<std::pair<std::string, latency>>;  // entry() references stay valid

latency& entry(report& r, const std::string& key);

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
  bool json = false;
};

report run_floor(const options& o);
report run_ops(const options& o);
// floor and ops in alternating batches (machine noise hits both alike), then
// both reports and the ratio of their p50s.
void run_ops_vs_floor(const options& o);

}  // namespace zkasio::bench
