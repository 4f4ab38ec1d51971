// Wait and hold histograms of a lock, from its observer
// (lock_options::observer), printed in Prometheus' text format: what a
// server would serve on its /metrics page. C contenders take one mutex R
// times each, holding it 1 to 3 ms.
//
// Usage: lock_metrics [--hosts H] [--lock PATH] [--contenders C] [--rounds R]
// Exit status: 0 when every round was granted and released, 1 otherwise, 2
// for a usage error.
#include <array>
#include <asio.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <zkasio/mutex.hpp>

namespace {

using namespace std::chrono_literals;

// One Prometheus histogram: cumulative counts per upper bound, a sum and a count.
class histogram {
 public:
  static constexpr std::array<double, 7> bounds{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 1.0};  // seconds

  void add(std::chrono::steady_clock::duration took) {
    double seconds = std::chrono::duration<double>(took).count();
    for (std::size_t i = 0; i < bounds.size(); ++i)
      if (seconds <= bounds[i]) ++buckets_[i];
    sum_ += seconds;
    ++count_;
  }
  std::size_t count() const { return count_; }

  void print(std::ostream& out, const std::string& name, const std::string& path) const {
    auto labels = [&](const std::string& le) { return "{path=\"" + path + "\",le=\"" + le + "\"}"; };
    out << "# TYPE " << name << " histogram\n";
    for (std::size_t i = 0; i < bounds.size(); ++i)
      out << name << "_bucket" << labels(std::to_string(bounds[i])) << ' ' << buckets_[i] << '\n';
    out << name << "_bucket" << labels("+Inf") << ' ' << count_ << '\n';
    out << name << "_sum{path=\"" << path << "\"} " << sum_ << '\n';
    out << name << "_count{path=\"" << path << "\"} " << count_ << '\n';
  }

 private:
  std::array<std::size_t, bounds.size()> buckets_{};
  double sum_ = 0;
  std::size_t count_ = 0;
};

struct metrics {
  histogram waits, holds;
  std::size_t failed = 0, lost = 0;

  // The observer: called on the lock's strand, as each thing happens.
  void hear(const zkasio::lock_event& e) {
    using kind = zkasio::lock_event::kind;
    if (e.what == kind::granted) waits.add(e.took);
    if (e.what == kind::released) holds.add(e.took);
    if (e.what == kind::failed) ++failed;
    if (e.what == kind::lost) ++lost;
  }
};

asio::awaitable<void> contend(zkasio::mutex& m, int rounds) {
  asio::steady_timer hold(co_await asio::this_coro::executor);
  for (int i = 0; i < rounds; ++i) {
    auto held = co_await m.async_acquire_for(30s);
    hold.expires_after(1ms + std::chrono::milliseconds(i % 3));
    co_await hold.async_wait(asio::use_awaitable);
    co_await held.async_release();
  }
}

int usage() {
  std::cerr << "usage: lock_metrics [--hosts H] [--lock PATH] [--contenders C] [--rounds R]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string hosts = "127.0.0.1:2181", path = "/metrics/lock";
  int contenders = 4, rounds = 25;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (!std::strcmp(argv[i], "--hosts") && (v = value())) hosts = v;
    else if (!std::strcmp(argv[i], "--lock") && (v = value())) path = v;
    else if (!std::strcmp(argv[i], "--contenders") && (v = value())) contenders = std::atoi(v);
    else if (!std::strcmp(argv[i], "--rounds") && (v = value())) rounds = std::atoi(v);
    else return usage();
  }
  if (contenders < 1 || rounds < 1) return usage();

  asio::io_context io;
  zkasio::session zk(io, {.hosts = hosts});
  metrics seen;
  zkasio::mutex m(zk, path, {.observer = [&seen](const zkasio::lock_event& e) { seen.hear(e); }});
  int status = 0, running = contenders;
  for (int c = 0; c < contenders; ++c)
    asio::co_spawn(io, contend(m, rounds), [&](std::exception_ptr failure) {
      try {
        if (failure) std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        std::cerr << "lock_metrics: " << e.what() << std::endl;
        status = 1;
      }
      // The last one closes the session: until then it keeps io.run() going.
      if (--running == 0) zk.async_close(asio::detached);
    });
  io.run();
  seen.waits.print(std::cout, "zkasio_lock_wait_seconds", path);
  seen.holds.print(std::cout, "zkasio_lock_hold_seconds", path);
  std::cout << "zkasio_lock_failed_total{path=\"" << path << "\"} " << seen.failed << '\n'
            << "zkasio_lock_lost_total{path=\"" << path << "\"} " << seen.lost << '\n';
  auto expected = static_cast<std::size_t>(contenders) * static_cast<std::size_t>(rounds);
  if (seen.waits.count() != expected || seen.holds.count() != expected) status = 1;
  return status;
}
