#include "latency.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <iostream>
#include <sstream>

namespace zkasio::bench {

double latency::percentile(double p) const {
  if (samples_us_.empty()) return 0;
  auto sorted = samples_us_;
  std::sort(sorted.begin(), sorted.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

std::string latency::json() const {
  char buffer[200];
  std::snprintf(buffer, sizeof buffer,
                "{\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"max\": %.1f, \"n\": %zu}",
                percentile(50), percentile(90), percentile(99), percentile(100), count());
  return buffer;
}

latency& entry(report& r, const std::string& key) {
  for (auto& [k, v] : r.latencies)
    if (k == key) return v;
  return r.latencies.emplace_back(key, latency{}).second;
}

void add_value(report& r, const std::string& key, double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  r.values.emplace_back(key, text);
}
void add_value(report& r, const std::string& key, bool value) {
  r.values.emplace_back(key, value ? "true" : "false");
}

void write_samples(const report& r, const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& [key, l] : r.latencies) {
    std::ofstream out(std::filesystem::path(dir) / (key + ".txt"));
    for (double us : l.samples_us()) out << us << '\n';
    if (!out) throw std::runtime_error("cannot write the samples to " + dir);
  }
}

std::string json_object(const report& r) {
  std::ostringstream out;
  out << '{';
  const char* separator = "";
  for (const auto& [key, l] : r.latencies) {
    out << separator << '"' << key << "\": " << l.json();
    separator = ", ";
  }
  for (const auto& [key, value] : r.values) {
    out << separator << '"' << key << "\": " << value;
    separator = ", ";
  }
  out << '}';
  return out.str();
}

void merge(report& into, const report& from) {
  for (const auto& [key, l] : from.latencies) entry(into, key).merge(l);
}

void run_ops_vs_floor(const options& o) {
  options batch = o;
  batch.rounds = std::max(1, o.rounds / o.batches);
  report floor, ops;
  for (int i = 0; i < o.batches; ++i) {
    merge(floor, run_floor(batch));
    merge(ops, run_ops(batch));
  }
  if (o.json) {
    std::ostringstream out;
    out << "{\"floor\": " << json_object(floor) << ", \"ops\": " << json_object(ops)
        << ", \"ratio_p50\": {";
    for (std::size_t i = 0; i < ops.latencies.size(); ++i) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.3f",
                    ops.latencies[i].second.percentile(50) / floor.latencies[i].second.percentile(50));
      out << (i ? ", " : "") << '"' << ops.latencies[i].first << "\": " << ratio;
    }
    out << "}}";
    std::cout << out.str() << std::endl;
    return;
  }
  std::printf("%-32s %12s %12s %8s\n", "p50 microseconds", "floor", "ops", "ratio");
  for (std::size_t i = 0; i < ops.latencies.size(); ++i) {
    double f = floor.latencies[i].second.percentile(50), z = ops.latencies[i].second.percentile(50);
    std::printf("%-32s %12.1f %12.1f %8.3f\n", ops.latencies[i].first.c_str(), f, z, z / f);
  }
}

void print(const report& r, bool json) {
  if (json) {
    std::cout << json_object(r) << std::endl;
    return;
  }
  std::printf("%-32s %10s %10s %10s %10s %8s\n", "microseconds", "p50", "p90", "p99", "max", "n");
  for (const auto& [key, l] : r.latencies)
    std::printf("%-32s %10.1f %10.1f %10.1f %10.1f %8zu\n", key.c_str(), l.percentile(50),
                l.percentile(90), l.percentile(99), l.percentile(100), l.count());
  for (const auto& [key, value] : r.values) std::printf("%-32s %10s\n", key.c_str(), value.c_str());
}

}  // namespace zkasio::bench
