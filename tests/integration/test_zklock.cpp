// The zklock command: every exit status, signal forwarding, a lock lost while
// the command runs, the margins of a clamped session timeout, and job control
// on a terminal.
#include <doctest/doctest.h>
#include <poll.h>
#include <unistd.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <zkasio/mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

#include "support/async.hpp"
#include "support/http_port.hpp"
#include "support/lock_test.hpp"
#include "support/process.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

std::vector<std::string> with_zklock(std::vector<std::string> args) {
  args.insert(args.begin(), ZKASIO_ZKLOCK);
  return args;
}

int zklock(std::vector<std::string> args) { return wait_child(spawn(with_zklock(std::move(args))), 60s); }
// The same while the test's own sessions, on `io`, hold their locks: `io`
// runs meanwhile.
int zklock(asio::io_context& io, std::vector<std::string> args) {
  running_meanwhile heartbeats(io);
  return zklock(std::move(args));
}

// zklock's exit status and all it printed (stdout, then stderr's lines as
// they came: one pipe), within `limit` (then killed: -1).
struct zklock_output {
  int status = -1;
  std::string text;
};
zklock_output zklock_says(std::vector<std::string> args, std::chrono::milliseconds limit = 60s) {
  args.insert(args.begin(), {"sh", "-c", "exec \"$0\" \"$@\" 2>&1", ZKASIO_ZKLOCK});
  int out = -1;
  int pid = spawn(args, &out);
  zklock_output result;
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (char buffer[4096];;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd readable{out, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) <= 0) break;
    auto n = ::read(out, buffer, sizeof buffer);
    if (n <= 0) break;
    result.text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out);
  result.status = wait_child(pid, std::max<std::chrono::milliseconds>(
                                      std::chrono::duration_cast<std::chrono::milliseconds>(
                                          deadline - std::chrono::steady_clock::now()),
                                      0ms));
  return result;
}
zklock_output zklock_says(asio::io_context& io, std::vector<std::string> args) {
  running_meanwhile heartbeats(io);
  return zklock_says(std::move(args));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The command of the signal and job-control tests: it writes its pid and its
// background sleep's first, says when it is continued, and exits 7 from its
// trap of every signal zklock passes on (WINCH is only noted).
const std::string traps =
    "trap 'echo resumed' CONT; trap 'echo trapped; exit 7' TERM INT HUP QUIT USR1 USR2 ALRM PIPE; "
    "trap 'echo winch' WINCH; sleep 1000 & echo $$ $!; while :; do wait; done";

// The command's processes, from its first line "PID SLEEP_PID": killed at the
// end of the test if anything is left (the command leads its process group).
struct command_processes {
  explicit command_processes(const std::string& line) : pids(parse(line)), shell(pids[0]), sleeper(pids[1]) {}
  static std::array<int, 2> parse(const std::string& line) {
    std::array<int, 2> pids{-1, -1};
    std::istringstream(line) >> pids[0] >> pids[1];
    if (pids[0] <= 0 || pids[1] <= 0) throw std::runtime_error("no pids in '" + line + "'");
    return pids;
  }
  int pid() const { return pids[0]; }
  char state() const { return process_state(pids[0]); }
  bool gone(std::chrono::milliseconds timeout = 5s) const {
    return await_exit(pids[0], timeout) && await_exit(pids[1], timeout);
  }
  std::array<int, 2> pids;
  process_guard shell, sleeper;
};

// zklock started by the test (stdout a pipe) with a command that writes its
// pid first; the command is killed at the end of the test if still there.
struct zklock_process {
  explicit zklock_process(std::vector<std::string> args)
      : pid(spawn(with_zklock(std::move(args)), &out)), command(first_pid(out, pid)) {}
  ~zklock_process() { close(out); }
  static int first_pid(int fd, int zklock) {
    auto line = read_line(fd, 20s);
    if (line.empty()) {
      wait_child(zklock, 0ms);  // killed
      throw std::runtime_error("the command wrote no pid");
    }
    return std::stoi(line);
  }

  int out = -1;  // before pid: spawn sets it
  int pid;
  process_guard command;
};

// zklock on the shared server, with the command `sh -c script`.
std::vector<std::string> zklock_sh(const std::string& path, const std::string& script,
                                   const std::string& session_timeout = "6000") {
  return {ZKASIO_ZKLOCK, "--hosts", shared_hosts(), "--session-timeout", session_timeout, path, "--", "sh", "-c",
          script};
}

// A shell script with zklock's command line as its arguments ("$0" "$@").
std::vector<std::string> script_around(const std::string& script, std::vector<std::string> zklock) {
  zklock.insert(zklock.begin(), {"sh", "-c", script});
  return zklock;
}

// A command that reads a line from its standard input.
const std::string reads_a_line = "sleep 1000 & echo $$ $!; read line; echo \"got $line\"";

// Waits until no lock node is left under `path` (the server may still have to
// expire a session to delete one); false when `timeout` passed first.
bool await_no_lock_nodes(const std::string& hosts, const std::string& path, std::chrono::milliseconds timeout = 20s) {
  asio::io_context io;
  session s(io, test_options(hosts));
  return run(io, [&]() -> asio::awaitable<bool> {
    asio::steady_timer limit(co_await asio::this_coro::executor, timeout);
    for (;;) {
      auto [ec, listing] = co_await s.async_get_children(path, asio::experimental::as_tuple(asio::use_awaitable));
      if (ec == zk_error::no_node || (!ec && listing.names.empty())) co_return true;
      if (ec) throw zkasio::system_error(ec, "listing " + path);
      auto changed = co_await (
          s.async_wait_children_changed(path, listing.stat.cversion, asio::experimental::as_tuple(asio::use_awaitable)) ||
          limit.async_wait(asio::experimental::as_tuple(asio::use_awaitable)));
      if (changed.index() == 1) co_return false;
    }
  }(), timeout + 5s);
}

// A job-control test: zklock on a pseudo-terminal, run with `sh -c script`
// (inside `sh -c wrapper "$0" "$@"` when a wrapper is given), on a path of
// its own; its command's processes, from the command's first line.
struct zklock_job {
  zklock_job(terminal_job::mode m, const std::string& script, const std::string& wrapper = "",
             const std::string& session_timeout = "6000")
      : path(unique_path("zklock-job")),
        job(wrapper.empty() ? zklock_sh(path, script, session_timeout)
                            : script_around(wrapper, zklock_sh(path, script, session_timeout)),
            m),
        command(job.read_line(20s)) {}

  // The job has stopped (zklock, or its whole process group, by its own
  // SIGSTOP), and so has the command, first.
  void require_stopped() {
    REQUIRE(job.next_report(10s) == "stopped 19");
    CHECK(command.state() == 'T');
  }
  // The job's exit status, and nothing left: no process, no lock node.
  void check_ended(int status) {
    CHECK(job.wait_exit(10s) == status);
    CHECK(command.gone());
    CHECK(await_no_lock_nodes(shared_hosts(), path));
  }

  std::string path;
  terminal_job job;
  command_processes command;
};

}  // namespace

TEST_CASE("zklock exits with the command's status, or says why not") {
  auto path = unique_path("zklock");
  auto hosts = shared_hosts();
  CHECK(zklock({"--hosts", hosts, path, "--", "sh", "-c", "exit 3"}) == 3);
  CHECK(zklock({"--hosts", hosts, path, "--", "true"}) == 0);
  // The command has the fencing token in its environment.
  CHECK(zklock({"--hosts", hosts, path, "--", "sh", "-c", "test \"$ZKLOCK_FENCING_TOKEN\" -gt 0"}) == 0);
  CHECK(zklock({"--hosts", hosts, path, "--", "sh", "-c", "kill -9 $$"}) == 128 + 9);
  CHECK(zklock({"--hosts", hosts, path, "--", "/nonexistent/command"}) == 127);
  auto not_executable = std::filesystem::temp_directory_path() / ("zkasio-noexec-" + std::to_string(getpid()));
  { std::ofstream(not_executable) << "#!/bin/sh\n"; }
  std::filesystem::permissions(not_executable, std::filesystem::perms::owner_read);
  CHECK(zklock({"--hosts", hosts, path, "--", not_executable.string()}) == 126);
  std::filesystem::remove(not_executable);
  // zklock's own failures.
  CHECK(zklock({"--bogus"}) == 125);
  CHECK(zklock({"--hosts", hosts, "no-slash", "--", "true"}) == 125);
  CHECK(zklock({"--hosts", hosts, path}) == 125);
  CHECK(zklock({"--hosts", hosts, "--timeout", "soon", path, "--", "true"}) == 125);
  // No ZooKeeper server reached: 122, not the timeout's 124 ("held by another").
  CHECK(zklock({"--hosts", "127.0.0.1:1", "--timeout", "1", path, "--", "true"}) == 122);

  // The lock held elsewhere: the timeout passes, or --timeout 0 tries once.
  asio::io_context io;
  session s(io, test_options(hosts));
  mutex m(s, path);
  auto held = run(io, m.async_acquire(asio::use_awaitable));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0.3", path, "--", "true"}) == 124);
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", path, "--", "true"}) == 124);
  run(io, [&]() -> asio::awaitable<void> {
    // Nothing left behind by the failed attempts: only our node.
    auto contenders = co_await m.async_contenders(asio::use_awaitable);
    CHECK(contenders.size() == 1);
    co_await held.async_release(asio::use_awaitable);
  }());
}

TEST_CASE("zklock as a command-line tool: --help, usage errors, and what it says when no ZooKeeper answers") {
  // --help and -h: the usage on stdout, with the exit statuses; status 0.
  for (auto help : {"--help", "-h"}) {
    auto said = zklock_says({help});
    CHECK(said.status == 0);
    CHECK(said.text.rfind("usage: zklock", 0) == 0);
    CHECK(contains(said.text, "122 no ZooKeeper server could be"));
    CHECK(contains(said.text, "124 the\nlock was held by another"));
    CHECK(contains(said.text, "0: one look once connected"));
  }
  // A usage error: one line and where to look (before: the whole text).
  auto bogus = zklock_says({"--bogus"});
  CHECK(bogus.status == 125);
  CHECK(bogus.text == "zklock: unknown option '--bogus'\ntry 'zklock --help'\n");
  auto path = unique_path("zklock-cli");
  // Nothing listens: within the connect timeout, saying with -v what it
  // waits for and since when (before: silent, for ever).
  auto nothing = zklock_says({"--hosts", "127.0.0.1:1", "--connect-timeout", "2.5", "-v", path, "--", "true"});
  CHECK(nothing.status == 122);
  CHECK(contains(nothing.text, "waiting for a ZooKeeper server at 127.0.0.1:1 (connecting) for 2 s"));
  CHECK(contains(nothing.text, "no ZooKeeper server at 127.0.0.1:1 answered within"));
  // --timeout 0 is bounded by the connect timeout too.
  CHECK(zklock_says({"--hosts", "127.0.0.1:1", "--connect-timeout", "0.5", "--timeout", "0", path, "--", "true"})
            .status == 122);
  // A host that does not resolve, a port that is not ZooKeeper's: named.
  auto unresolvable = zklock_says({"--hosts", "no-such-host.invalid:2181", path, "--", "true"});
  CHECK(unresolvable.status == 122);
  CHECK(contains(unresolvable.text, "'no-such-host.invalid'"));
  http_port http;
  auto not_zookeeper = zklock_says({"--hosts", http.address(), "-v", path, "--", "true"});
  CHECK(not_zookeeper.status == 122);
  CHECK(contains(not_zookeeper.text, http.address() + " answered the handshake as no ZooKeeper server does"));
  CHECK_FALSE(contains(not_zookeeper.text, "connected, session timeout"));
}

TEST_CASE("zklock --read and --write: readers share, a writer excludes them; the plain lock is another lock") {
  auto path = unique_path("zklock-rw");
  auto hosts = shared_hosts();
  asio::io_context io;
  session s(io, test_options(hosts));
  shared_mutex rw(s, path);
  auto reading = run(io, rw.async_acquire_shared(asio::use_awaitable));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", "--read", path, "--", "true"}) == 0);
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", "--write", path, "--", "true"}) == 124);
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0.3", "--write", path, "--", "true"}) == 124);
  CHECK(zklock(io, {"--hosts", hosts, "--read", "--write", path, "--", "true"}) == 125);
  // A mutex on the same path is another recipe's lock, which it would not
  // exclude: refused, naming the other kind's node; run with --allow-mixed.
  auto mixed = zklock_says(io, {"--hosts", hosts, "--timeout", "0", path, "--", "true"});
  CHECK(mixed.status == 125);
  CHECK(contains(mixed.text, "holds a read/write lock's node _c_"));
  CHECK(contains(mixed.text, "--allow-mixed"));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", "--allow-mixed", path, "--", "true"}) == 0);
  // And a semaphore's layout on a plain lock's path.
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", "--semaphore", "2", path, "--", "true"}) == 125);
  run(io, [&]() -> asio::awaitable<void> {
    co_await reading.async_release(asio::use_awaitable);
    auto writing = co_await rw.async_acquire(asio::use_awaitable);
    CHECK((co_await rw.async_contenders(asio::use_awaitable)).size() == 1);  // nothing left by the attempts
    co_await writing.async_release(asio::use_awaitable);
  }());
  auto writing = run(io, rw.async_acquire(asio::use_awaitable));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0.3", "--read", path, "--", "true"}) == 124);
  run(io, writing.async_release(asio::use_awaitable));
  CHECK(await_no_lock_nodes(hosts, path));
}

TEST_CASE("zklock --semaphore N: at most N commands at once") {
  auto path = unique_path("zklock-semaphore");
  auto hosts = shared_hosts();
  asio::io_context io;
  session s(io, test_options(hosts));
  semaphore leases(s, path, 2);
  auto one = run(io, leases.async_acquire(asio::use_awaitable));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", "--semaphore", "2", path, "--", "true"}) == 0);
  auto two = run(io, leases.async_acquire(asio::use_awaitable));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0", "--semaphore", "2", path, "--", "true"}) == 124);
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "0.3", "--semaphore", "2", path, "--", "true"}) == 124);
  CHECK(zklock(io, {"--hosts", hosts, "--semaphore", "0", path, "--", "true"}) == 125);
  CHECK(zklock(io, {"--hosts", hosts, "--semaphore", "2", "--read", path, "--", "true"}) == 125);
  run(io, one.async_release(asio::use_awaitable));
  CHECK(zklock(io, {"--hosts", hosts, "--timeout", "5", "--semaphore", "2", path, "--", "true"}) == 0);
  run(io, two.async_release(asio::use_awaitable));
  CHECK(await_no_lock_nodes(hosts, path + "/leases"));
}

TEST_CASE("zklock passes TERM, INT, HUP, QUIT, USR1, USR2, ALRM and PIPE to the command, then releases and exits 128+N") {
  auto path = unique_path("zklock-signal");
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE}) {
    CAPTURE(signal_number);
    int out = -1;
    int pid = spawn({ZKASIO_ZKLOCK, "--hosts", shared_hosts(), path, "--", "sh", "-c", traps}, &out);
    command_processes command(read_line(out, 20s));
    if (signal_number == SIGTERM) {
      // WINCH reaches the command too, and changes nothing else.
      ::kill(pid, SIGWINCH);
      CHECK(read_line(out, 10s) == "winch");
    }
    ::kill(pid, signal_number);
    // The command proves it got the signal: it exits 7 from its trap.
    CHECK(read_line(out, 10s) == "trapped");
    CHECK(wait_child(pid, 10s) == 128 + signal_number);
    CHECK(command.gone());
    close(out);
  }
  CHECK(await_no_lock_nodes(shared_hosts(), path));
}

TEST_CASE("a lock lost while the command runs: the command is gone before the server could expire the session") {
  zk_servers servers;
  zklock_process z({"--hosts", servers.hosts(), "--session-timeout", "2000", "/lost", "--", "sh", "-c",
                    "echo $$; exec sleep 1000"});
  // The server stops answering: the session cannot be confirmed any more.
  servers.pause();
  CHECK(wait_child(z.pid, 20s) == 123);
  CHECK(await_exit(z.command.pid(), 1s));  // gone, while the server is still paused
  servers.resume();
}

TEST_CASE_FIXTURE(proxied_server, "a waiting zklock whose session expires queues again in the next one and runs its command once granted") {
  session holder(io, test_options(servers.hosts(), 10s));
  mutex m(holder, "/requeue");
  semaphore one_lease(holder, "/requeue-lease", 1);
  std::vector<std::string> args{ZKASIO_ZKLOCK, "--hosts", proxy.address(), "--session-timeout", "2000"};
  std::string line = "/requeue";  // where its node waits
  auto family = queue_family::mutex;
  SUBCASE("the mutex") { args.push_back("/requeue"); }
  SUBCASE("the semaphore, waiting for room") {
    args.insert(args.end(), {"--semaphore", "1", "/requeue-lease"});
    line = "/requeue-lease/leases";
    family = queue_family::semaphore;
  }
  args.insert(args.end(), {"--", "echo", "ran"});
  run(io, [&]() -> asio::awaitable<void> {
    lock held;
    if (family == queue_family::mutex) held = co_await m.async_acquire();
    else held = co_await one_lease.async_acquire();
    int out = -1;
    process_guard z(spawn(args, &out));
    REQUIRE(co_await settles_at(holder, line, 2, 10s, family));  // in line
    // Cut off until the server expires its session: its node goes with it.
    proxy.refuse_connections(true);
    proxy.drop_now();
    REQUIRE(co_await settles_at(holder, line, 1, 10s, family));
    proxy.refuse_connections(false);
    REQUIRE(co_await settles_at(holder, line, 2, 10s, family));  // in line again, in a new session
    co_await held.async_release();
    CHECK(read_line(out, 20s) == "ran");
    CHECK(wait_child(z.pid(), 20s) == 0);
    close(out);
  }(), 60s);
}

TEST_CASE("the margins follow the negotiated session timeout, not the requested one") {
  // The server clamps every session to 2000 ms; zklock asks for 10000. The
  // command ignores SIGTERM, so only the SIGKILL ends it.
  zk_servers servers({.max_session_timeout_ms = 2000});
  zklock_process z({"--hosts", servers.hosts(), "--session-timeout", "10000", "/clamped", "--", "sh", "-c",
                    "trap '' TERM; echo $$; exec sleep 1000"});
  int command_pid = z.command.pid();
  // The server's last sight of the session is no later than this: it may
  // expire the session from paused + 2000 ms on.
  using std::chrono::steady_clock;
  auto since_pause = [paused = steady_clock::now()] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - paused);
  };
  servers.pause();
  bool gone = await_exit(command_pid, 2000ms - since_pause());
  if (gone) MESSAGE("the command was gone " << since_pause().count() << " ms after the pause");
  if (!gone) {
    gone = await_exit(command_pid, 20s);
    FAIL_CHECK("the command was still running at the earliest expiry; gone " << since_pause().count()
                                                                             << " ms after the pause");
  }
  // The release is bounded by the negotiated timeout too.
  CHECK(wait_child(z.pid, 20s) == 123);
  CHECK(since_pause() < 8s);
  MESSAGE("zklock exited " << since_pause().count() << " ms after the pause");
  servers.resume();
  CHECK(await_no_lock_nodes(servers.hosts(), "/clamped"));
  CHECK(gone);
}

// Job control, on a pseudo-terminal under a job-control shell (see
// terminal_job): the command never runs without the lock.

TEST_CASE("Ctrl-Z stops the command and zklock as one job; fg: zklock confirms the lock, the command resumes with the terminal") {
  zklock_job t(terminal_job::mode::foreground, traps);
  t.job.type("\x1a");  // Ctrl-Z: SIGTSTP to the terminal's foreground group, the command's
  t.require_stopped();
  t.job.fg();
  CHECK(t.job.next_report(10s) == "continued");
  CHECK(t.job.read_line(10s) == "resumed");  // continued by zklock, the lock confirmed
  {
    asio::io_context io;
    session s(io, test_options(shared_hosts()));
    mutex m(s, t.path);
    CHECK(run(io, m.async_contenders(asio::use_awaitable)).size() == 1);
  }
  // The terminal is the command's again: Ctrl-C reaches it alone, and the
  // command's own status comes back (a signal passed on by zklock would give 130).
  t.job.type("\x03");
  CHECK(t.job.read_line(10s) == "trapped");
  t.check_ended(7);
}

TEST_CASE("SIGTSTP sent to zklock stops the command and zklock; SIGCONT to zklock resumes the command") {
  zklock_job t(terminal_job::mode::background, traps);
  ::kill(t.job.pid(), SIGTSTP);
  t.require_stopped();
  ::kill(t.job.pid(), SIGCONT);  // as bg
  CHECK(t.job.next_report(10s) == "continued");
  CHECK(t.job.read_line(10s) == "resumed");
  ::kill(t.job.pid(), SIGTERM);
  CHECK(t.job.read_line(10s) == "trapped");
  t.check_ended(128 + SIGTERM);
}

TEST_CASE("zklock stopped past the session timeout: continued, it kills the command before it runs again and exits 123") {
  zklock_job t(terminal_job::mode::foreground, traps, "", "2000");
  t.job.type("\x1a");
  t.require_stopped();
  // The server expires the stopped zklock's session: the lock node goes.
  REQUIRE(await_no_lock_nodes(shared_hosts(), t.path, 20s));
  t.job.fg();
  t.check_ended(123);
  // The command never ran again: it did not even run its CONT trap.
  CHECK(t.job.read_rest(10s) == "");
}

TEST_CASE("in the foreground, the command reads the terminal") {
  zklock_job t(terminal_job::mode::foreground, reads_a_line);
  t.job.type("hello\n");
  CHECK(t.job.read_line(10s) == "got hello");
  t.check_ended(0);
}

TEST_CASE("in the background, a command that reads the terminal stops, and zklock with it; fg: it reads") {
  zklock_job t(terminal_job::mode::background, reads_a_line);
  // SIGTTIN stops the command; zklock stops too instead of holding the lock for ever.
  t.require_stopped();
  t.job.fg();
  t.job.type("hello\n");
  CHECK(t.job.read_line(10s) == "got hello");
  t.check_ended(0);
}

TEST_CASE("a job of several processes (a script, a pipeline) stops as one when its command stops") {
  // zklock shares its process group with the script's shell and cat.
  zklock_job t(terminal_job::mode::foreground, traps, "{ \"$0\" \"$@\"; echo \"zklock exited $?\"; } | cat");
  t.job.type("\x1a");            // to the command, which has the terminal
  t.require_stopped();           // the script too: zklock stopped its whole job
  t.job.fg();
  CHECK(t.job.read_line(10s) == "resumed");
  t.job.type("\x03");
  CHECK(t.job.read_line(10s) == "trapped");
  CHECK(t.job.read_line(10s) == "zklock exited 7");
  t.check_ended(0);
}

TEST_CASE("a process of zklock's job that reads the terminal (a pager) gets it back from the command") {
  // zklock | pager, in one process group (the outer shell ignores SIGTTIN, so
  // that only the pipeline's processes meet it). Once the command runs (with
  // the terminal), the pager reads a line from the terminal: SIGTTIN to
  // zklock's group, zklock included.
  zklock_job t(terminal_job::mode::foreground, traps,
               "trap '' TTIN; (trap - TTIN; \"$0\" \"$@\"; echo \"zklock exited $?\" >/dev/tty) | "
               "(trap - TTIN; read pids; echo \"$pids\"; read line </dev/tty; echo \"typed $line\"; cat)");
  process_guard zklock(parent_pid(t.command.pid()));
  t.job.type("hello\n");
  CHECK(t.job.read_line(10s) == "typed hello");
  // zklock never stopped (it would no longer watch the lock), the command runs on.
  CHECK(process_state(zklock.pid()) != 'T');
  CHECK(t.command.state() != 'T');
  // In the background now: signals still reach it through zklock.
  ::kill(zklock.pid(), SIGTERM);
  // In either order: the first comes through cat.
  std::set<std::string> lines{t.job.read_line(10s), t.job.read_line(10s)};
  CHECK(lines == std::set<std::string>{"trapped", "zklock exited 143"});
  t.check_ended(0);
  CHECK(await_exit(zklock.pid(), 5s));
}

TEST_CASE("zklock leading its session (no shell to continue it): a stop of the command does not hold") {
  zklock_job t(terminal_job::mode::session_leader, traps);
  t.job.type("\x1a");  // the command stops, and is continued at once: zklock never stops
  CHECK(t.job.read_line(10s) == "resumed");
  t.job.type("\x03");
  CHECK(t.job.read_line(10s) == "trapped");
  CHECK(t.job.next_report(10s) == "exit 7");  // nothing stopped before
  CHECK(t.command.gone());
  CHECK(await_no_lock_nodes(shared_hosts(), t.path));
}
