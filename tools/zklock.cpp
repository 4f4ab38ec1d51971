// zklock: like flock(1), for a ZooKeeper lock (zkasio::mutex, Curator-compatible).
//
//   zklock [--hosts H] [--timeout S] [--session-timeout MS]
//          [--policy on_suspend|before_expiry] [--owner TEXT] [-v] /lock/path -- COMMAND ARGS...
//
// Acquires the lock, runs the command in its own process group, releases when
// it exits. Exit status: the command's own; 128+N when it died of signal N;
// 124 the timeout passed before the grant; 125 zklock's own failure; 126 the
// command cannot be run; 127 not found; 123 the lock was lost (or may have
// been, under the policy) while the command ran: the command's process group
// got SIGTERM, then SIGKILL, timed from the session timeout the server
// granted so that it is gone before the server could expire the session.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>
#include <zkasio/mutex.hpp>

extern char** environ;

namespace {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;
using clock_type = std::chrono::steady_clock;

constexpr int lock_lost_status = 123, timed_out_status = 124, failure_status = 125,
              cannot_run_status = 126, not_found_status = 127;

const char* usage =
    "usage: zklock [--hosts H] [--timeout S] [--session-timeout MS]\n"
    "              [--policy on_suspend|before_expiry] [--owner TEXT] [-v] /lock/path -- COMMAND "
    "ARGS...\n";

struct options {
  std::string hosts;
  std::optional<double> timeout;  // seconds, from start
  std::chrono::milliseconds session_timeout{10000};
  zkasio::lost_policy policy = zkasio::lost_policy::before_expiry;
  std::string owner;
  bool verbose = false;
  std::string path;
  std::vector<std::string> command;
};

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "zklock: " << what << '\n' << usage;
  std::exit(failure_status);
}

options parse(int argc, char** argv) {
  options o;
  const char* env = std::getenv("ZKASIO_HOSTS");
  o.hosts = env && *env ? env : "127.0.0.1:2181";
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  o.owner = std::string(host) + ":" + std::to_string(getpid());
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "--hosts") {
      o.hosts = value();
    } else if (arg == "--timeout") {
      auto text = value();
      char* end = nullptr;
      double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || seconds < 0) fail("--timeout must be seconds >= 0, not '" + text + "'");
      o.timeout = seconds;
    } else if (arg == "--session-timeout") {
      auto text = value();
      char* end = nullptr;
      long ms = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end || ms < 1) fail("--session-timeout must be milliseconds > 0, not '" + text + "'");
      o.session_timeout = std::chrono::milliseconds(ms);
    } else if (arg == "--policy") {
      auto text = value();
      if (text == "on_suspend") o.policy = zkasio::lost_policy::on_suspend;
      else if (text == "before_expiry") o.policy = zkasio::lost_policy::before_expiry;
      else fail("--policy must be on_suspend or before_expiry, not '" + text + "'");
    } else if (arg == "--owner") {
      o.owner = value();
    } else if (arg == "-v") {
      o.verbose = true;
    } else if (!arg.empty() && arg[0] == '-') {
      fail("unknown option '" + arg + "'");
    } else if (o.path.empty()) {
      o.path = arg;
    } else {
      fail("unexpected argument '" + arg + "' (the command goes after --)");
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.path.empty()) fail("no lock path");
  if (auto problem = zkasio::path_problem(o.path); !problem.empty()) fail(problem);
  if (o.command.empty()) fail("no command (give it after --)");
  return o;
}

class runner {
 public:
  explicit runner(options o) : o_(std::move(o)) {}

  int run() {
    asio::io_context io(1);
    zkasio::session s(io, {.hosts = o_.hosts, .session_timeout = o_.session_timeout});
    int status = failure_status;
    asio::co_spawn(io, main_task(io, s), [&](std::exception_ptr e, int result) {
      status = e ? failure_status : result;
      io.stop();
    });
    io.run();
    return status;
  }

 private:
  void say(const std::string& what) const {
    if (o_.verbose) std::cerr << "zklock: " << what << std::endl;
  }

  awaitable<int> main_task(asio::io_context& io, zkasio::session& s) {
    auto start = clock_type::now();
    asio::signal_set stop_signals(io, SIGTERM, SIGINT, SIGHUP);
    std::optional<clock_type::time_point> deadline;
    if (o_.timeout)
      deadline = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(*o_.timeout));

    // Connect, within the timeout (or one session timeout for --timeout 0 and none).
    say("connecting to " + o_.hosts);
    auto connect_by = deadline && *o_.timeout > 0 ? *deadline : start + o_.session_timeout;
    if (!o_.timeout) connect_by = clock_type::time_point::max();
    asio::steady_timer connect_limit(io, connect_by);
    auto connected = co_await (s.async_connect(as_tuple(use_awaitable)) ||
                               connect_limit.async_wait(as_tuple(use_awaitable)) ||
                               stop_signals.async_wait(as_tuple(use_awaitable)));
    if (connected.index() == 2) co_return 128 + std::get<1>(std::get<2>(connected));
    if (connected.index() == 1 || std::get<0>(std::get<0>(connected))) {
      std::cerr << "zklock: ZooKeeper unreachable at " << o_.hosts << '\n';
      co_return failure_status;
    }
    // Every margin follows the timeout the server granted, which may be
    // shorter than the one asked for.
    timeout_ = s.negotiated_timeout() > std::chrono::milliseconds::zero() ? s.negotiated_timeout()
                                                                          : o_.session_timeout;
    say("connected, session timeout " + std::to_string(timeout_.count()) + " ms");
    // The command must be gone before the server can expire the session: the
    // lost signal fires a third of the timeout early, SIGKILL follows halfway.
    zkasio::mutex m(s, o_.path, {.policy = o_.policy, .safety_margin = timeout_ / 3, .data = o_.owner});

    say("acquiring " + o_.path);
    std::error_code ec;
    zkasio::lock held;
    {
      auto acquire = [&]() -> awaitable<std::tuple<std::error_code, zkasio::lock>> {
        if (o_.timeout && *o_.timeout == 0) co_return co_await m.async_try_acquire(as_tuple(use_awaitable));
        if (deadline) co_return co_await m.async_acquire_until(*deadline, as_tuple(use_awaitable));
        co_return co_await m.async_acquire(as_tuple(use_awaitable));
      };
      auto got = co_await (acquire() || stop_signals.async_wait(as_tuple(use_awaitable)));
      if (got.index() == 1) co_return 128 + std::get<1>(std::get<1>(got));
      std::tie(ec, held) = std::move(std::get<0>(got));
    }
    if (ec == zkasio::error::lock_timeout || ec == zkasio::error::lock_busy) {
      say("not granted before the timeout");
      co_return timed_out_status;
    }
    if (ec) {
      std::cerr << "zklock: cannot acquire " << o_.path << ": " << ec.message() << '\n';
      co_return failure_status;
    }
    say("granted " + held.node() + " (fencing token " + std::to_string(held.fencing_token()) + ")");

    int status = co_await run_command(io, held, stop_signals);
    // Bounded: with the server gone, the session (and the node) ends anyway.
    asio::steady_timer limit(io, timeout_);
    auto released = co_await (held.async_release(as_tuple(use_awaitable)) ||
                              limit.async_wait(as_tuple(use_awaitable)));
    if (released.index() == 0 && !std::get<0>(std::get<0>(released))) say("released");
    else say("not confirmed released: the session ends with zklock");
    co_return status;
  }

  // Runs the command in its own process group and waits for it; forwards
  // TERM, INT and HUP to it; stops it when the lock may be lost.
  awaitable<int> run_command(asio::io_context& io, zkasio::lock& held, asio::signal_set& stop_signals) {
    asio::signal_set child_exit(io, SIGCHLD);  // before the spawn: no exit goes unnoticed
    std::vector<char*> args;
    for (auto& a : o_.command) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    pid_t child = 0;
    int spawned = posix_spawnp(&child, args[0], nullptr, &attributes, args.data(), environ);
    posix_spawnattr_destroy(&attributes);
    if (spawned != 0) {
      std::cerr << "zklock: " << o_.command[0] << ": " << std::strerror(spawned) << '\n';
      co_return spawned == ENOENT ? not_found_status : cannot_run_status;
    }
    say("running " + o_.command[0] + " (pid " + std::to_string(child) + ")");

    // The lost signal, as an event this coroutine can wait for.
    asio::steady_timer lost(io, clock_type::time_point::max());
    held.lost_slot().assign([&](asio::cancellation_type) { lost.cancel(); });
    if (held.lost()) lost.cancel();

    std::optional<int> forwarded, exit_status;
    bool lock_lost = false;
    auto reap = [&]() {
      int raw = 0;
      if (waitpid(child, &raw, WNOHANG) == child)
        exit_status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    };
    reap();
    std::optional<clock_type::time_point> kill_at;
    while (!exit_status) {
      asio::steady_timer kill_timer(io, kill_at.value_or(clock_type::time_point::max()));
      auto event = co_await (child_exit.async_wait(as_tuple(use_awaitable)) ||
                             stop_signals.async_wait(as_tuple(use_awaitable)) ||
                             lost.async_wait(as_tuple(use_awaitable)) ||
                             kill_timer.async_wait(as_tuple(use_awaitable)));
      switch (event.index()) {
        case 0: break;
        case 1: {
          int signal_number = std::get<1>(std::get<1>(event));
          forwarded = signal_number;
          say("forwarding signal " + std::to_string(signal_number));
          ::kill(-child, signal_number);
          break;
        }
        case 2:
          if (!lock_lost) {
            lock_lost = true;
            say("the lock may be lost: stopping the command");
            ::kill(-child, SIGTERM);
            kill_at = clock_type::now() + timeout_ / 6;
          }
          lost.expires_at(clock_type::time_point::max());
          break;
        case 3:
          say("the command did not stop: killing it");
          ::kill(-child, SIGKILL);
          kill_at.reset();
          break;
      }
      reap();
    }
    // Whatever the command left in its group goes with it.
    ::kill(-child, SIGKILL);
    if (lock_lost) co_return lock_lost_status;
    if (forwarded) co_return 128 + *forwarded;
    co_return *exit_status;
  }

  options o_;
  std::chrono::milliseconds timeout_{};  // the negotiated session timeout
};

}  // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  try {
    return runner(std::move(o)).run();
  } catch (const std::exception& e) {
    std::cerr << "zklock: " << e.what() << '\n';
    return failure_status;
  }
}
