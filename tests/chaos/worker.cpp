#include "chaos/worker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <zkasio/mutex.hpp>
#include <zkasio/session.hpp>

namespace zkasio::chaos {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;

std::string lock_path(const std::string& root, int lock) { return root + "/lock-" + std::to_string(lock); }

std::vector<std::string> worker_arguments(const worker_options& o) {
  return {std::to_string(o.index),
          o.hosts,
          o.root,
          std::to_string(o.locks),
          std::to_string(o.coroutines),
          std::to_string(o.stop_at),
          o.log,
          std::to_string(o.seed),
          std::to_string(o.session_timeout.count()),
          std::to_string(o.safety_margin.count()),
          std::to_string(o.longest_wait.count())};
}

worker_options parse_worker_arguments(const std::vector<std::string>& args) {
  if (args.size() != 11) throw std::invalid_argument("a worker takes 11 arguments, not " + std::to_string(args.size()));
  worker_options o;
  o.index = std::stoi(args[0]);
  o.hosts = args[1];
  o.root = args[2];
  o.locks = std::stoi(args[3]);
  o.coroutines = std::stoi(args[4]);
  o.stop_at = std::stoll(args[5]);
  o.log = args[6];
  o.seed = static_cast<unsigned>(std::stoul(args[7]));
  o.session_timeout = std::chrono::milliseconds(std::stoll(args[8]));
  o.safety_margin = std::chrono::milliseconds(std::stoll(args[9]));
  o.longest_wait = std::chrono::milliseconds(std::stoll(args[10]));
  return o;
}

namespace {

// The longest hold of the long-hold lock.
constexpr std::chrono::milliseconds longest_hold{12000};

ns now() { return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The log: one write(2) per line, appended, so that a crash loses nothing written.
class record_file {
 public:
  explicit record_file(const std::string& path) : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
  }
  ~record_file() { ::close(fd_); }
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;
  void write(std::string line) {
    line += '\n';
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("cannot write the log");
  }

 private:
  int fd_;
};

struct worker {
  const worker_options& o;
  session& s;
  std::vector<std::unique_ptr<mutex>> locks;
  record_file log;
  std::map<int, acquire_record> in_flight;  // by coroutine: the acquire it waits for

  awaitable<void> contend(int id) {
    std::mt19937 random(o.seed * 1000 + static_cast<unsigned>(id));
    asio::steady_timer hold(co_await asio::this_coro::executor);
    auto wait_ms = std::uniform_int_distribution<long>(500, o.longest_wait.count());
    while (now() < o.stop_at) {
      // Coroutine 0 takes the long-hold lock (the last one) only.
      int which = id == 0 ? o.locks : static_cast<int>(random() % static_cast<unsigned>(o.locks));
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms(random));
      acquire_record a{o.index, which, now(), std::nullopt,
                       std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count(), ""};
      in_flight[id] = a;
      auto [ec, held] = co_await locks[which]->async_acquire_until(deadline, as_tuple(use_awaitable));
      in_flight.erase(id);
      a.end = now();
      a.result = ec ? ec.message() : "ok";
      for (auto& c : a.result)
        if (c == ' ') c = '_';
      log.write(format(a));
      if (ec) continue;
      hold_record h{o.index, which, *a.end, 0, held.fencing_token(), false};
      if (which == o.locks) hold.expires_after(std::chrono::milliseconds(1000 + random() % (longest_hold.count() - 999)));
      else hold.expires_after(std::chrono::microseconds(random() % 5001));
      co_await (hold.async_wait(as_tuple(use_awaitable)) || held.async_wait_lost(as_tuple(use_awaitable)));
      h.end = now();
      h.lost = held.lost();
      log.write(format(h));
      co_await held.async_release(as_tuple(use_awaitable));
    }
  }

  // After the faults stopped, each lock once more: a free lock must be
  // granted. The last grants of the loops end by then, and a session lost to
  // the faults has expired.
  awaitable<void> final_try_of(int which, std::chrono::steady_clock::time_point deadline) {
    auto [ec, held] = co_await locks[which]->async_acquire_until(deadline, as_tuple(use_awaitable));
    log.write(format(final_try{o.index, which, !ec}));
    if (!ec) co_await held.async_release(as_tuple(use_awaitable));
  }

  // The nodes of this session under the lock paths, once the background
  // deletes of the last releases are done (at most 20 s; -1 if it could
  // not tell).
  awaitable<int> orphans() {
    asio::steady_timer retry(co_await asio::this_coro::executor);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      int mine = 0;
      for (int i = 0; i <= o.locks && mine >= 0; ++i) {
        auto path = lock_path(o.root, i);
        auto [ec, kids] = co_await s.async_get_children(path, as_tuple(use_awaitable));
        if (ec == zk_error::no_node) continue;
        if (ec) mine = -1;
        for (std::size_t k = 0; !ec && k < kids.names.size() && mine >= 0; ++k) {
          auto [stat_ec, st] = co_await s.async_exists(path + "/" + kids.names[k], as_tuple(use_awaitable));
          if (stat_ec) mine = -1;
          else if (st && st->ephemeral_owner == s.id()) ++mine;
        }
      }
      if (mine == 0 || std::chrono::steady_clock::now() > until) co_return mine;
      retry.expires_after(std::chrono::milliseconds(100));
      co_await retry.async_wait(use_awaitable);
    }
  }
};

}  // namespace

int run_worker(const worker_options& o) {
  asio::io_context io(1);
  session s(io, session_options{.hosts = o.hosts, .session_timeout = o.session_timeout});
  worker w{o, s, {}, record_file(o.log), {}};
  for (int i = 0; i <= o.locks; ++i)
    w.locks.push_back(std::make_unique<mutex>(
        s, lock_path(o.root, i),
        lock_options{.safety_margin = o.safety_margin, .data = "worker-" + std::to_string(o.index)}));
  // An acquire that hangs must not hang the worker: past the last deadline
  // (and a pause's worth), what is still in flight is written down.
  auto stop_at = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(o.stop_at));
  auto final_deadline = stop_at + o.longest_wait + longest_hold + 2 * o.session_timeout + std::chrono::seconds(5);
  asio::steady_timer watchdog(io, final_deadline + std::chrono::seconds(10));
  int status = 0;
  watchdog.async_wait([&](std::error_code ec) {
    if (ec) return;
    for (auto& [id, a] : w.in_flight) w.log.write(format(a));
    std::cerr << "chaos worker " << o.index << ": " << w.in_flight.size() << " acquires never completed\n";
    std::_Exit(3);
  });
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        auto executor = co_await asio::this_coro::executor;
        asio::steady_timer all_done(executor, asio::steady_timer::time_point::max());
        int remaining = o.coroutines;
        for (int id = 0; id < o.coroutines; ++id)
          asio::co_spawn(executor, w.contend(id), [&](std::exception_ptr e) {
            if (e) {
              try {
                std::rethrow_exception(e);
              } catch (const std::exception& x) {
                std::cerr << "chaos worker " << o.index << ": " << x.what() << '\n';
              }
              status = 1;
            }
            if (--remaining == 0) all_done.cancel();
          });
        co_await all_done.async_wait(as_tuple(use_awaitable));
        for (int i = 0; i <= o.locks; ++i) co_await w.final_try_of(i, final_deadline);
        w.log.write("orphans " + std::to_string(o.index) + " " + std::to_string(co_await w.orphans()));
        watchdog.cancel();
        co_await s.async_close(as_tuple(use_awaitable));
      },
      [&](std::exception_ptr e) {
        if (e) status = 1;
        watchdog.cancel();
      });
  io.run();
  return status;
}

}  // namespace zkasio::chaos
