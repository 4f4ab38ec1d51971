// zklock: like flock(1), for a ZooKeeper lock (zkasio::mutex, Curator-compatible).
//
//   zklock [--hosts H] [--timeout S] [--connect-timeout S] [--session-timeout MS]
//          [--read | --write | --semaphore N] [--allow-mixed] [--policy on_suspend|before_expiry]
//          [--owner TEXT] [-v] /lock/path -- COMMAND ARGS...
//
// --read and --write take a zkasio::shared_mutex's read or write lock instead
// (Curator's InterProcessReadWriteLock layout): readers share, writers
// exclude everyone. --semaphore N takes one of N leases of a
// zkasio::semaphore (Curator's InterProcessSemaphoreV2 layout): at most N
// such commands run at once. The kinds of lock on one path do not exclude
// each other: a path is one of them, never several, and zklock refuses a
// path that holds another kind's nodes (--allow-mixed goes on all the same).
//
// Acquires the lock, runs the command in its own process group, releases when
// it exits. Exit status: the command's own; 128+N when it died of signal N;
// 122 no ZooKeeper server could be reached (none answered within the connect
// timeout, the host did not resolve, the port is not ZooKeeper's, or the
// timeout passed while disconnected); 124 the lock was held by another until
// the timeout passed; 125 zklock's own failure (a usage error too); 126 the
// command cannot be run; 127 not found; 123 the lock was lost (or may have
// been, under the policy) while the command ran: the command's process group
// got SIGTERM, then SIGKILL, timed from the session timeout the server
// granted so that it is gone before the server could expire the session.
//
// zklock never lets the command run without the lock, and behaves in a
// terminal as the command alone would:
// - Signals: TERM, INT, HUP, QUIT, USR1, USR2, ALRM and PIPE sent to zklock go
//   to the command's group, and zklock exits 128+N once it has ended; WINCH
//   goes too (no effect on the status). A signal ignored when zklock started
//   stays ignored, by zklock and the command (nohup); the command starts with
//   the default action for every signal zklock handles. zklock never dies of
//   SIGPIPE (one raised by its own writes counts as one sent to it).
// - The terminal: when zklock's group is the foreground group of its
//   controlling terminal, the command's group becomes the foreground group
//   before the command runs (it can read the terminal; Ctrl-C, Ctrl-\ and
//   Ctrl-Z reach it), and zklock takes the terminal back afterwards. If
//   another process of zklock's group (a pager in `zklock ... | less`) reads
//   the terminal meanwhile, the group keeps the terminal from then on.
// - Job control: when the command stops (Ctrl-Z, SIGTSTP, SIGSTOP, SIGTTIN,
//   SIGTTOU), zklock takes the terminal back and stops its own process group
//   (itself, or a whole pipeline or script: the job stops as one, and the
//   shell sees it stop); only itself without a terminal or in the session
//   leader's group. SIGTSTP and SIGTTIN sent to zklock go to the command,
//   which stops, and zklock follows. When continued (fg, bg, SIGCONT), zklock
//   first confirms with the server that it still holds the lock (its node is
//   there, owned by its session, within the session timeout), then gives the
//   terminal back to the command (when zklock is in the foreground) and
//   continues it. If not (e.g. it was stopped past the session timeout), the
//   command's group is killed with SIGKILL while still stopped, and zklock
//   exits 123. When zklock leads its own session (ssh -t host zklock ...),
//   no shell could continue it: a stopped command is continued at once, as
//   the kernel ignores terminal stops in such orphaned groups.
// - SIGKILL and SIGSTOP sent to zklock itself cannot be handled: after them
//   the command runs on unwatched (the lock may be lost under it).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
#include <deque>
#include <iostream>
#include <optional>
#include <string>
#include <vector>
#include <zkasio/mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

#include "recipes/rules/lock_queue.hpp"

extern char** environ;

namespace {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace asio::experimental::awaitable_operators;
using clock_type = std::chrono::steady_clock;

clock_type::duration to_duration(double seconds) {
  return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
}

constexpr int unreachable_status = 122, lock_lost_status = 123, timed_out_status = 124, failure_status = 125,
              cannot_run_status = 126, not_found_status = 127;

// Passed on to the command's process group. All but WINCH (whose default is
// to do nothing) end zklock before the command runs, with status 128+N.
constexpr std::array passed_signals{SIGTERM, SIGINT,  SIGHUP,  SIGQUIT, SIGUSR1,
                                    SIGUSR2, SIGALRM, SIGPIPE, SIGWINCH};

const char* usage =
    "usage: zklock [--hosts H] [--timeout S] [--connect-timeout S] [--session-timeout MS]\n"
    "              [--read | --write | --semaphore N] [--allow-mixed]\n"
    "              [--policy on_suspend|before_expiry] [--owner TEXT] [-v] /lock/path -- COMMAND ARGS...\n"
    "Runs COMMAND, in its own process group, while holding the ZooKeeper lock /lock/path.\n"
    "\n"
    "  --hosts H             the ensemble, host:port[,host:port...][/chroot] (default $ZKASIO_HOSTS,\n"
    "                        else 127.0.0.1:2181)\n"
    "  --timeout S           give up after S seconds without the lock (default: wait for ever);\n"
    "                        0: one look once connected, the lock taken only if free at once\n"
    "  --connect-timeout S   give up when no ZooKeeper server answered within S seconds of the\n"
    "                        start (default 10; also bounds --timeout 0)\n"
    "  --session-timeout MS  the ZooKeeper session timeout to ask for (default 10000)\n"
    "  --read, --write       a read/write lock's read (shared) or write lock instead\n"
    "  --semaphore N         one of N leases instead: at most N commands at once\n"
    "  --allow-mixed         go on though the path holds another kind's nodes (the kinds do not\n"
    "                        exclude each other: a path is one kind)\n"
    "  --policy P            when the lock counts as lost while disconnected: on_suspend (at\n"
    "                        once) or before_expiry (default: just before the session could expire)\n"
    "  --owner TEXT          written into the lock node (default host:pid)\n"
    "  -v                    say what zklock does and waits for, on stderr\n"
    "  -h, --help            this text\n"
    "\n"
    "TERM INT HUP QUIT USR1 USR2 ALRM PIPE WINCH are passed to the command. In the\n"
    "terminal's foreground the command gets the terminal. When the command stops,\n"
    "zklock's job stops too; continued, zklock confirms the lock before continuing it.\n"
    "The command finds the lock's fencing token in $ZKLOCK_FENCING_TOKEN.\n"
    "\n"
    "Exit status: the command's; 128+N it died of signal N; 122 no ZooKeeper server could be\n"
    "reached (none answered, the host did not resolve, not a ZooKeeper port, or disconnected\n"
    "at the timeout); 123 the lock was lost while the command ran (it was stopped); 124 the\n"
    "lock was held by another until the timeout; 125 zklock failed (a usage error too);\n"
    "126 the command cannot be run; 127 the command was not found.\n";

// Which lock: the mutex, a shared_mutex's read or write lock, or a lease.
enum class lock_mode { mutex, read, write, lease };

struct options {
  lock_mode mode = lock_mode::mutex;
  std::size_t leases = 0;  // with lock_mode::lease
  std::string hosts;
  std::optional<double> timeout;  // seconds, from start
  double connect_timeout = 10;    // seconds, from start
  std::chrono::milliseconds session_timeout{10000};
  bool allow_mixed = false;
  zkasio::lost_policy policy = zkasio::lost_policy::before_expiry;
  std::string owner;
  bool verbose = false;
  std::string path;
  std::vector<std::string> command;
};

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "zklock: " << what << "\ntry 'zklock --help'\n";
  std::exit(failure_status);
}

// Seconds >= 0 from an option's value, or a usage error naming the option.
double seconds_of(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(seconds >= 0)) fail(option + " must be seconds >= 0, not '" + text + "'");
  return seconds;
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
    } else if (arg == "-h" || arg == "--help") {
      std::cout << usage;
      std::exit(0);
    } else if (arg == "--timeout") {
      o.timeout = seconds_of(arg, value());
    } else if (arg == "--connect-timeout") {
      o.connect_timeout = seconds_of(arg, value());
    } else if (arg == "--allow-mixed") {
      o.allow_mixed = true;
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
    } else if (arg == "--read" || arg == "--write" || arg == "--semaphore") {
      auto mode = arg == "--read" ? lock_mode::read : arg == "--write" ? lock_mode::write : lock_mode::lease;
      if (o.mode != lock_mode::mutex && o.mode != mode) fail("--read, --write and --semaphore exclude each other");
      o.mode = mode;
      if (mode == lock_mode::lease) {
        auto text = value();
        char* end = nullptr;
        long n = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end || n < 1) fail("--semaphore must be a number of leases >= 1, not '" + text + "'");
        o.leases = static_cast<std::size_t>(n);
      }
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

bool ignored(int signal_number) {
  struct sigaction current {};
  return sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

// The signals zklock handles: those its parent did not leave ignored (an
// ignored one stays ignored, for the command too, as nohup wants). Taken
// before any handler is installed.
struct handled_signals {
  std::vector<int> passed;  // of passed_signals
  std::vector<int> stop;    // SIGTSTP, SIGTTIN: they stop the command, which zklock follows
  handled_signals() {
    for (int n : passed_signals)
      if (!ignored(n)) passed.push_back(n);
    for (int n : {SIGTSTP, SIGTTIN})
      if (!ignored(n)) stop.push_back(n);
  }
};

// The controlling terminal, while zklock runs a command: given to the
// command's process group when zklock's group has it. SIGTTOU is blocked in
// zklock for its whole life, so tcsetpgrp works from the background and
// zklock's own writes never stop it.
class terminal {
 public:
  terminal() : fd_(::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) {}
  ~terminal() {
    if (fd_ >= 0) ::close(fd_);
  }
  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;

  int fd() const { return fd_; }
  // zklock's process group is the terminal's foreground group.
  bool ours() const { return fd_ >= 0 && tcgetpgrp(fd_) == getpgrp(); }
  // From zklock's group to `group`, if zklock's group has it.
  bool give(pid_t group) const { return ours() && tcsetpgrp(fd_, group) == 0; }
  // From `group` back to zklock's, if `group` has it.
  bool take_back(pid_t group) const {
    return fd_ >= 0 && tcgetpgrp(fd_) == group && tcsetpgrp(fd_, getpgrp()) == 0;
  }
  // Stops zklock's job as Ctrl-Z or SIGTTIN would have stopped it had the
  // command been in zklock's process group: the whole group (a pipeline, a
  // script), so that the shell sees the job stopped. Never the group of the
  // session's leader (an interactive shell without job control), and only
  // zklock without a terminal (no job control, no shell to continue others).
  void stop_job() const {
    if (fd_ >= 0 && getpgrp() != getsid(0)) ::kill(0, SIGSTOP);
    else ::raise(SIGSTOP);
  }

 private:
  int fd_;
};

// The signals sent to zklock, as a queue no wait can lose. A handler that is
// always re-armed feeds it, and a doorbell (a timer kept expired while the
// queue is not empty) wakes whoever waits: waiting on the signal_set itself
// in `a || b` would lose a signal that came as the other branch won.
class signal_queue {
 public:
  explicit signal_queue(asio::io_context& io) : set_(io), bell_(io, clock_type::time_point::max()) {}

  void add(int signal_number) { set_.add(signal_number); }
  void remove(int signal_number) { set_.remove(signal_number); }
  void start() { arm(); }

  std::optional<int> pop() {
    if (queue_.empty()) return std::nullopt;
    int signal_number = queue_.front();
    queue_.pop_front();
    if (queue_.empty()) bell_.expires_at(clock_type::time_point::max());
    return signal_number;
  }
  // Completes once a signal is queued (at once if one is).
  awaitable<void> wait() {
    if (!queue_.empty()) co_return;
    co_await bell_.async_wait(as_tuple(use_awaitable));
  }

 private:
  void arm() {
    set_.async_wait([this](zkasio::error_code ec, int signal_number) {
      if (ec) return;  // destroyed: `this` is gone
      queue_.push_back(signal_number);
      bell_.expires_at(clock_type::time_point::min());
      arm();
    });
  }

  asio::signal_set set_;
  asio::steady_timer bell_;
  std::deque<int> queue_;
};

class runner {
 public:
  runner(options o, handled_signals handled) : o_(std::move(o)), handled_(std::move(handled)) {}

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
    // Lives until zklock exits: zklock never dies of these signals. Before
    // the command runs, each of them ends zklock (128+N).
    signal_queue signals(io);
    for (int n : handled_.passed)
      if (n != SIGWINCH) signals.add(n);
    signals.start();
    std::optional<clock_type::time_point> deadline;
    if (o_.timeout)
      deadline = start + to_duration(*o_.timeout);

    // Connect, within the connect timeout (and the timeout, when not 0),
    // saying with -v what it waits for.
    say("connecting to " + o_.hosts);
    auto connect_by = start + to_duration(o_.connect_timeout);
    if (deadline && *o_.timeout > 0) connect_by = std::min(connect_by, *deadline);
    for (;;) {
      asio::steady_timer tick(io, std::min(connect_by, clock_type::now() + std::chrono::seconds(2)));
      auto connected = co_await (s.async_connect(as_tuple(use_awaitable)) ||
                                 tick.async_wait(as_tuple(use_awaitable)) || signals.wait());
      if (auto ending = signals.pop()) co_return 128 + *ending;
      if (connected.index() == 0) {
        if (auto [ec] = std::get<0>(connected); ec) co_return unreachable(s, ec);
        break;
      }
      auto waited = std::chrono::duration<double>(clock_type::now() - start).count();
      if (clock_type::now() >= connect_by) {
        std::cerr << "zklock: no ZooKeeper server at " << o_.hosts << " answered within " << waited << " s\n";
        co_return unreachable_status;
      }
      say("waiting for a ZooKeeper server at " + o_.hosts + " (" + zkasio::to_string(s.state()) + ") for " +
          std::to_string(static_cast<int>(waited)) + " s");
    }
    // Every margin follows the timeout the server granted, which may be
    // shorter than the one asked for.
    timeout_ = s.negotiated_timeout() > std::chrono::milliseconds::zero() ? s.negotiated_timeout()
                                                                          : o_.session_timeout;
    say("connected, session timeout " + std::to_string(timeout_.count()) + " ms");
    // The command must be gone before the server can expire the session: the
    // lost signal fires a third of the timeout early (SIGTERM), SIGKILL
    // follows a sixth of the timeout later (kill_at, below).
    // A waiter whose session expires queues again in the next session: it
    // held nothing, so nothing is lost but its place in line.
    const zkasio::lock_options lock_options{
        .policy = o_.policy, .safety_margin = timeout_ / 3, .data = o_.owner, .requeue_on_expiry = true};
    zkasio::mutex m(s, o_.path, lock_options);
    zkasio::shared_mutex rw(s, o_.path, lock_options);
    zkasio::semaphore leases(s, o_.path, std::max<std::size_t>(o_.leases, 1), lock_options);

    if (!o_.allow_mixed)
      if (auto other = co_await other_kind(s); !other.empty()) {
        std::cerr << "zklock: " << o_.path << " holds " << other << ", which " << kind_name(o_.mode)
                  << " does not exclude: use the same kind, or --allow-mixed\n";
        co_return failure_status;
      }
    say("acquiring " + o_.path);
    zkasio::error_code ec;
    zkasio::lock held;
    {
      auto acquire = [&]() -> awaitable<std::tuple<zkasio::error_code, zkasio::lock>> {
        bool at_once = o_.timeout && *o_.timeout == 0;
        auto until = deadline.value_or(clock_type::time_point::max());
        auto token = as_tuple(use_awaitable);
        // (No conditional expressions around co_await: g++ 12 runs both.)
        switch (o_.mode) {
          case lock_mode::mutex:
            if (at_once) co_return co_await m.async_try_acquire(token);
            co_return co_await m.async_acquire_until(until, token);
          case lock_mode::read:
            if (at_once) co_return co_await rw.async_try_acquire_shared(token);
            co_return co_await rw.async_acquire_shared_until(until, token);
          case lock_mode::lease:
            if (at_once) co_return co_await leases.async_try_acquire(token);
            co_return co_await leases.async_acquire_until(until, token);
          case lock_mode::write:
            break;
        }
        if (at_once) co_return co_await rw.async_try_acquire(token);
        co_return co_await rw.async_acquire_until(until, token);
      };
      auto got = co_await (acquire() || signals.wait());
      if (got.index() == 0) std::tie(ec, held) = std::move(std::get<0>(got));
    }
    // A signal that came with the grant still ends zklock: the lock goes back.
    if (auto ending = signals.pop()) {
      if (held) co_await release(io, held);
      co_return 128 + *ending;
    }
    if (ec == zkasio::error::lock_timeout || ec == zkasio::error::lock_busy) {
      say("not granted before the timeout: held by another");
      co_return timed_out_status;
    }
    if (ec == zkasio::error::not_connected || ec == zkasio::condition::session_gone) co_return unreachable(s, ec);
    if (ec) {
      std::cerr << "zklock: cannot acquire " << o_.path << ": " << ec.message() << '\n';
      co_return failure_status;
    }
    say("granted " + held.node() + " (fencing token " + std::to_string(held.fencing_token().czxid) + ")");
    // For the command to pass to what it writes (see the README's fencing).
    setenv("ZKLOCK_FENCING_TOKEN", std::to_string(held.fencing_token().czxid).c_str(), 1);

    int status = co_await run_command(io, s, held, signals);
    co_await release(io, held);
    co_return status;
  }

  // The session could not reach a ZooKeeper server (`ec`): says why, naming
  // the host or server when a failure ended the session.
  int unreachable(const zkasio::session& s, zkasio::error_code ec) const {
    auto why = s.failure();
    std::cerr << "zklock: cannot reach ZooKeeper at " << o_.hosts << ": " << (why.empty() ? ec.message() : why)
              << '\n';
    return ec == zkasio::error::not_connected || ec == zkasio::error::unresolvable_host ||
                   ec == zkasio::error::not_zookeeper
               ? unreachable_status
               : failure_status;
  }

  static const char* kind_name(lock_mode mode) {
    switch (mode) {
      case lock_mode::mutex: return "a plain lock";
      case lock_mode::read:
      case lock_mode::write: return "a read/write lock";
      case lock_mode::lease: return "a semaphore";
    }
    return "";
  }

  // Another kind of lock's nodes under the path, described; empty if none
  // (or the path does not exist yet). A semaphore keeps its nodes under
  // `locks` and `leases`; the locks keep theirs under the path.
  awaitable<std::string> other_kind(zkasio::session& s) const {
    auto [ec, kids] = co_await s.async_get_children(o_.path, as_tuple(use_awaitable));
    if (ec) co_return std::string();
    for (auto& name : kids.names) {
      if (name == "locks" || name == "leases") {
        if (o_.mode != lock_mode::lease) co_return "a semaphore's '" + name + "'";
        continue;
      }
      auto node = zkasio::detail::parse_lock_node(name);
      if (!node) continue;
      bool rw = node->kind == zkasio::detail::node_kind::read || node->kind == zkasio::detail::node_kind::write;
      bool same = rw ? (o_.mode == lock_mode::read || o_.mode == lock_mode::write)
                     : node->kind == zkasio::detail::node_kind::lock && o_.mode == lock_mode::mutex;
      if (same) continue;
      switch (node->kind) {
        case zkasio::detail::node_kind::lock: co_return "a plain lock's node " + name;
        case zkasio::detail::node_kind::latch: co_return "an election's node " + name;
        case zkasio::detail::node_kind::lease: co_return "a semaphore's lease " + name;
        default: co_return "a read/write lock's node " + name;
      }
    }
    co_return std::string();
  }

  // Bounded: with the server gone, the session (and the node) ends anyway.
  awaitable<void> release(asio::io_context& io, zkasio::lock& held) {
    asio::steady_timer limit(io, timeout_);
    auto released = co_await (held.async_release(as_tuple(use_awaitable)) ||
                              limit.async_wait(as_tuple(use_awaitable)));
    if (released.index() == 0 && !std::get<0>(std::get<0>(released))) say("released");
    else say("not confirmed released: the session ends with zklock");
  }

  // After a stop: whether the lock is still ours, by a fresh answer from the
  // server (the node there, owned by this session), within the session timeout.
  awaitable<bool> confirm_held(asio::io_context& io, zkasio::session& s, zkasio::lock& held,
                               asio::steady_timer& lost, const bool& may_be_lost) {
    if (may_be_lost || held.lost()) co_return false;
    asio::steady_timer limit(io, timeout_);
    auto answer = co_await (s.async_exists(held.node(), as_tuple(use_awaitable)) ||
                            lost.async_wait(as_tuple(use_awaitable)) ||
                            limit.async_wait(as_tuple(use_awaitable)));
    if (answer.index() != 0) co_return false;
    auto& [ec, stat] = std::get<0>(answer);
    co_return !ec && stat && stat->ephemeral_owner == s.id() && !may_be_lost && !held.lost();
  }

  // Runs the command in its own process group (with the terminal, when
  // zklock has it) and waits for it; passes signals on; follows its stops;
  // stops it when the lock may be lost.
  awaitable<int> run_command(asio::io_context& io, zkasio::session& s, zkasio::lock& held,
                             signal_queue& signals) {
    if (held.lost()) co_return lock_lost_status;  // never started without the lock
    // While the command runs: its state changes (before the spawn, so that
    // none goes unnoticed), WINCH, and the stops zklock passes on.
    signals.add(SIGCHLD);
    for (int n : handled_.passed)
      if (n == SIGWINCH) signals.add(n);
    for (int n : handled_.stop) signals.add(n);
    struct command_signals_off {
      signal_queue& signals;
      const handled_signals& handled;
      ~command_signals_off() {
        signals.remove(SIGCHLD);
        if (std::find(handled.passed.begin(), handled.passed.end(), SIGWINCH) != handled.passed.end())
          signals.remove(SIGWINCH);
        for (int n : handled.stop) signals.remove(n);
      }
    } off{signals, handled_};

    terminal tty;
    std::vector<char*> args;
    for (auto& a : o_.command) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t none, handled;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    // What zklock handles goes back to the default in the command.
    sigemptyset(&handled);
    for (int n : handled_.passed) sigaddset(&handled, n);
    for (int n : handled_.stop) sigaddset(&handled, n);
    sigaddset(&handled, SIGCHLD);
    posix_spawnattr_setsigdefault(&attributes, &handled);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // In the foreground, the command's group gets the terminal before the
    // command runs (so it cannot meet SIGTTIN first).
    bool foreground = tty.ours();
    if (foreground) posix_spawn_file_actions_addtcsetpgrp_np(&actions, tty.fd());
    // Whether the command gets the terminal whenever zklock's group has it.
    bool share_terminal = true;
    pid_t child = 0;
    int spawned = posix_spawnp(&child, args[0], &actions, &attributes, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (spawned != 0) {
      // The terminal may have gone to the failed child's group.
      if (foreground && !tty.ours()) tcsetpgrp(tty.fd(), getpgrp());
      std::cerr << "zklock: " << o_.command[0] << ": " << std::strerror(spawned) << '\n';
      co_return spawned == ENOENT ? not_found_status : cannot_run_status;
    }
    say("running " + o_.command[0] + " (pid " + std::to_string(child) + ")" +
        (foreground ? " in the foreground" : ""));

    // The lost signal, as a state and a timer that expires (at once, also for
    // later waits) when the lock may be lost.
    asio::steady_timer lost(io, clock_type::time_point::max());
    bool may_be_lost = false;
    held.lost_slot().assign([&](asio::cancellation_type) {
      may_be_lost = true;
      lost.expires_at(clock_type::time_point::min());
    });
    if (held.lost()) may_be_lost = true;

    std::optional<int> forwarded, exit_status;
    bool lock_lost = false, stopped = false;
    std::optional<clock_type::time_point> kill_at;
    auto reap = [&]() {
      int raw = 0;
      while (!exit_status && waitpid(child, &raw, WNOHANG | WUNTRACED | WCONTINUED) == child) {
        if (WIFEXITED(raw)) exit_status = WEXITSTATUS(raw);
        else if (WIFSIGNALED(raw)) exit_status = 128 + WTERMSIG(raw);
        else if (WIFSTOPPED(raw)) stopped = true;
        else if (WIFCONTINUED(raw)) stopped = false;
      }
    };
    auto kill_now = [&](const char* why) {
      say(why);
      ::kill(-child, SIGKILL);
    };
    // Every wake-up looks at everything: the events are states, none is lost.
    for (;;) {
      while (auto signal_number = signals.pop()) {
        if (*signal_number == SIGCHLD) continue;  // reaped below
        if (*signal_number == SIGTSTP || *signal_number == SIGTTIN) {
          if (*signal_number == SIGTTIN && tty.take_back(child)) {
            // Another process of zklock's job (a pipeline's pager) read the
            // terminal while the command had it: the job keeps it from now
            // on, and what that read stopped goes on.
            say("the job needs the terminal: keeping it from the command");
            share_terminal = false;
            ::kill(0, SIGCONT);
            continue;
          }
        } else if (*signal_number != SIGWINCH) {
          forwarded = *signal_number;
        }
        say("passing on signal " + std::to_string(*signal_number));
        ::kill(-child, *signal_number);
      }
      if (may_be_lost || held.lost()) {
        may_be_lost = true;
        lost.expires_at(clock_type::time_point::max());  // no more wake-ups from it
        if (!lock_lost) {
          lock_lost = true;
          say("the lock may be lost: stopping the command");
          ::kill(-child, SIGTERM);
          kill_at = clock_type::now() + timeout_ / 6;
        }
      }
      if (kill_at && clock_type::now() >= *kill_at) {
        kill_now("the command did not stop: killing it");
        kill_at.reset();
      }
      reap();
      if (exit_status) break;
      if (stopped && lock_lost) {
        // Never continued without the lock: killed while stopped.
        kill_now("the command is stopped and the lock may be lost: killing it");
      } else if (stopped && getsid(0) == getpid()) {
        // zklock leads its session: no shell could continue a stopped job.
        // As the kernel ignores terminal stops in such (orphaned) groups, the
        // command goes on; zklock never stopped, so the lock was watched.
        say("the command stopped, with no job control above zklock: continuing it");
        stopped = false;
        ::kill(-child, SIGCONT);
      } else if (stopped) {
        // Follow the command: the job stops as one (the shell sees it stop).
        tty.take_back(child);
        say("the command stopped: stopping too");
        tty.stop_job();
        say("continued: confirming the lock");
        if (co_await confirm_held(io, s, held, lost, may_be_lost)) {
          say("the lock is still held: continuing the command");
          if (share_terminal) tty.give(child);
          stopped = false;
          ::kill(-child, SIGCONT);
        } else {
          lock_lost = true;
          kill_now("the lock is lost: killing the command before it runs again");
        }
        continue;  // look again at once: things may have happened meanwhile
      }
      asio::steady_timer kill_timer(io, kill_at.value_or(clock_type::time_point::max()));
      co_await (signals.wait() || lost.async_wait(as_tuple(use_awaitable)) ||
                kill_timer.async_wait(as_tuple(use_awaitable)));
    }
    // The handler must not outlive `lost` (the lock lives on until released).
    held.lost_slot().clear();
    tty.take_back(child);
    // Whatever the command left in its group goes with it.
    ::kill(-child, SIGKILL);
    if (lock_lost) co_return lock_lost_status;
    if (forwarded) co_return 128 + *forwarded;
    co_return *exit_status;
  }

  options o_;
  handled_signals handled_;
  std::chrono::milliseconds timeout_{};  // the negotiated session timeout
};

}  // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  handled_signals handled;  // before any handler is installed
  // zklock hands the terminal over and back from the background, and must
  // never be stopped by its own writes (stty tostop): SIGTTOU stays blocked.
  sigset_t ttou;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, nullptr);
  try {
    return runner(std::move(o), std::move(handled)).run();
  } catch (const std::exception& e) {
    std::cerr << "zklock: " << e.what() << '\n';
    return failure_status;
  }
}
