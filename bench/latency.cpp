#include "latency.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
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
  for (auto& [k, v] : r)
    if (k == key) return v;
  return r.emplace_back(key, latency{}).second;
}

void print(const report& r, bool json) {
  if (json) {
    std::ostringstream out;
    out << '{';
    for (std::size_t i = 0; i < r.size(); ++i)
      out << (i ? ", " : "") << '"' << r[i].first << "\": " << r[i].second.json();
    out << '}';
    std::cout << out.str() << std::endl;
    return;
  }
  std::printf("%-32s %10s %10s %10s %10s %8s\n", "microseconds", "p50", "p90", "p99", "max", "n");
  for (const auto& [key, l] : r)
    std::printf("%-32s %10.1f %10.1f %10.1f %10.1f %8zu\n", key.c_str(), l.percentile(50),
                l.percentile(90), l.percentile(99), l.percentile(100), l.count());
}

}  // namespace zkasio::bench
