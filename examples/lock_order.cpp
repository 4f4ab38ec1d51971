// lock_order: several processes take turns holding one zkasio::mutex and
// print when they get it. With LOG, each holder also appends "enter NAME" and
// "exit NAME" to it while holding the lock (one O_APPEND write each), so that
// overlapping holders would show: the cross-process tests use it that way.
// With MODE ("read" or "write"), the lock is a zkasio::shared_mutex's read or
// write lock, and the lines are "enter MODE NAME" and "exit MODE NAME"; with
// "lease-N", one lease of a zkasio::semaphore of N ("enter lease NAME");
// with "leader", the leadership of a zkasio::election ("enter leader NAME");
// with "race" a zkasio::race_mutex, with "race-leader" an election in race
// mode (the same node: they exclude each other). With "local-N", N
// coroutines share one zkasio::mutex with local_handoff (max_run 2, max_time
// 20 ms), each taking it ROUNDS times, as "NAME.i" ("enter mutex NAME.i").
//
//   lock_order HOSTS LOCK_PATH NAME ROUNDS [LOG [read|write|lease-N|leader|race|race-leader|local-N]]
#include <fcntl.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <iostream>
#include <string>
#include <zkasio/election.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

using asio::awaitable;
using asio::use_awaitable;

namespace {

void append(const std::string& log, const std::string& line) {
  if (log.empty()) return;
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!written) throw std::runtime_error("cannot write " + log);
}

// Holds `held` for `hold` between "enter WHO" and "exit WHO" in the log, then releases it.
awaitable<void> hold_and_release(zkasio::lock held, std::string who, std::string log, std::chrono::milliseconds hold) {
  append(log, "enter " + who + "\n");
  asio::steady_timer timer(co_await asio::this_coro::executor, hold);
  co_await timer.async_wait(use_awaitable);
  append(log, "exit " + who + "\n");
  co_await held.async_release(use_awaitable);
}

awaitable<void> take_turns(zkasio::session& s, std::string path, std::string name, int rounds,
                           std::string log, std::string mode) {
  zkasio::mutex m(s, path, {.data = name});
  zkasio::shared_mutex rw(s, path, {.data = name});
  bool lease = mode.starts_with("lease-");
  zkasio::semaphore leases(s, path, lease ? std::stoul(mode.substr(6)) : 1, {.data = name});
  zkasio::election election(s, path);
  zkasio::race_mutex racing(s, path, {.data = name});
  zkasio::election race_election(s, path, zkasio::election_mode::race);
  auto who = mode.empty() ? name : (lease ? "lease" : mode) + " " + name;
  for (int i = 1; i <= rounds; ++i) {
    zkasio::lock held;
    if (mode.empty()) held = co_await m.async_acquire(use_awaitable);
    else if (lease) held = co_await leases.async_acquire(use_awaitable);
    else if (mode == "leader") held = co_await election.async_campaign(name, use_awaitable);
    else if (mode == "race") held = co_await racing.async_acquire(use_awaitable);
    else if (mode == "race-leader") held = co_await race_election.async_campaign(name, use_awaitable);
    else if (mode == "read") held = co_await rw.async_acquire_shared(use_awaitable);
    else held = co_await rw.async_acquire(use_awaitable);
    std::cout << name << " holds the lock (round " << i << ", node "
              << (held.node() == path ? held.node() : held.node().substr(path.size() + 1)) << ", fencing token "
              << held.fencing_token().czxid << "." << held.fencing_token().local << ")" << std::endl;
    // Shared holds long enough for holders of other processes to overlap.
    bool shared = lease || mode == "read";
    co_await hold_and_release(std::move(held), who, log, std::chrono::milliseconds(shared ? 20 : 2));
  }
  co_await s.async_close(use_awaitable);
}

// "local-N": `coroutines` contenders of this process share one mutex that
// hands the lock over in memory; each holds it 2 ms per round.
awaitable<void> take_local_turns(zkasio::session& s, std::string path, std::string name, int rounds,
                                 std::string log, int coroutines) {
  using namespace std::chrono_literals;
  zkasio::mutex m(s, path, {.data = name, .local_handoff = zkasio::local_handoff_bound{.max_run = 2, .max_time = 20ms}});
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer all_done(executor, asio::steady_timer::time_point::max());
  int running = coroutines;
  std::exception_ptr failure;
  for (int c = 0; c < coroutines; ++c) {
    auto who = "mutex " + name + "." + std::to_string(c);
    asio::co_spawn(
        executor,
        [&m, who, rounds, log]() -> awaitable<void> {
          for (int i = 0; i < rounds; ++i) {
            auto held = co_await m.async_acquire(use_awaitable);
            co_await hold_and_release(std::move(held), who, log, 2ms);
          }
        },
        [&](std::exception_ptr e) {
          if (e && !failure) failure = e;
          if (--running == 0) all_done.cancel();
        });
  }
  zkasio::error_code ignored;
  co_await all_done.async_wait(asio::redirect_error(use_awaitable, ignored));
  if (failure) std::rethrow_exception(failure);
  std::cout << name << ": " << coroutines << " coroutines took the lock " << rounds << " times each" << std::endl;
  co_await s.async_close(use_awaitable);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc == 7 ? argv[6] : "";
  bool lease = mode.size() > 6 && mode.starts_with("lease-") &&
               mode.find_first_not_of("0123456789", 6) == std::string::npos;
  bool local = mode.size() > 6 && mode.starts_with("local-") &&
               mode.find_first_not_of("0123456789", 6) == std::string::npos;
  bool known = mode.empty() || lease || local || mode == "read" || mode == "write" || mode == "leader" ||
               mode == "race" || mode == "race-leader";
  if (argc < 5 || argc > 7 || !known) {
    std::cerr << "usage: lock_order HOSTS LOCK_PATH NAME ROUNDS [LOG [read|write|lease-N|leader|race|race-leader|local-N]]\n";
    return 2;
  }
  asio::io_context io;
  zkasio::session s(io, {.hosts = argv[1]});
  int status = 0;
  std::string log = argc >= 6 ? argv[5] : "";
  auto work = local ? take_local_turns(s, argv[2], argv[3], std::stoi(argv[4]), log, std::stoi(mode.substr(6)))
                    : take_turns(s, argv[2], argv[3], std::stoi(argv[4]), log, mode);
  asio::co_spawn(io, std::move(work),
                 [&](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                     std::cerr << argv[3] << ": " << x.what() << '\n';
                   }
                   status = 1;
                   s.async_close([&](zkasio::error_code) { io.stop(); });
                 });
  io.run();
  return status;
}
