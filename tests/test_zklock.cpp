// The zklock command: every exit status, signal forwarding, a lock lost while
// the command runs, and the margins of a clamped session timeout.
#include <doctest/doctest.h>
#include <unistd.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <zkasio/mutex.hpp>

#include "support/async.hpp"
#include "support/process.hpp"
#include "support/session_test.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

int zklock(std::vector<std::string> args) {
  args.insert(args.begin(), ZKASIO_ZKLOCK);
  return wait_child(spawn(args), 60s);
}

// Waits until no lock node is left under `path` (the server may still have to
// expire a session to delete one); false when `timeout` passed first.
bool await_no_lock_nodes(const std::string& hosts, const std::string& path, std::chrono::milliseconds timeout = 20s) {
  asio::io_context io;
  session s(io, test_options(hosts));
  return run(io, [&]() -> asio::awaitable<bool> {
    asio::steady_timer limit(co_await asio::this_coro::executor, timeout);
    for (;;) {
      auto [ec, listing] = co_await s.async_get_children(path, asio::experimental::as_tuple(asio::use_awaitable));
      if (ec == error::no_node || (!ec && listing.names.empty())) co_return true;
      if (ec) throw std::system_error(ec, "listing " + path);
      auto changed = co_await (
          s.async_wait_children_changed(path, listing.stat.cversion, asio::experimental::as_tuple(asio::use_awaitable)) ||
          limit.async_wait(asio::experimental::as_tuple(asio::use_awaitable)));
      if (changed.index() == 1) co_return false;
    }
  }(), timeout + 5s);
}

}  // namespace

TEST_CASE("zklock exits with the command's status, or says why not") {
  auto path = unique_path("zklock");
  auto hosts = shared_hosts();
  CHECK(zklock({"--hosts", hosts, path, "--", "sh", "-c", "exit 3"}) == 3);
  CHECK(zklock({"--hosts", hosts, path, "--", "true"}) == 0);
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
  CHECK(zklock({"--hosts", "127.0.0.1:1", "--timeout", "1", path, "--", "true"}) == 125);

  // The lock held elsewhere: the timeout passes, or --timeout 0 tries once.
  asio::io_context io;
  session s(io, test_options(hosts));
  mutex m(s, path);
  auto held = run(io, m.async_acquire(asio::use_awaitable));
  CHECK(zklock({"--hosts", hosts, "--timeout", "0.3", path, "--", "true"}) == 124);
  CHECK(zklock({"--hosts", hosts, "--timeout", "0", path, "--", "true"}) == 124);
  run(io, [&]() -> asio::awaitable<void> {
    // Nothing left behind by the failed attempts: only our node.
    auto contenders = co_await m.async_contenders(asio::use_awaitable);
    CHECK(contenders.size() == 1);
    co_await held.async_release(asio::use_awaitable);
  }());
}

TEST_CASE("zklock passes TERM, INT and HUP to the command, then releases and exits 128+N") {
  auto path = unique_path("zklock-signal");
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) {
    CAPTURE(signal_number);
    int out = -1;
    // The command proves it got the signal: it exits 7 from its trap.
    int pid = spawn({ZKASIO_ZKLOCK, "--hosts", shared_hosts(), path, "--", "sh", "-c",
                     "trap 'echo trapped; exit 7' TERM INT HUP; echo started; sleep 1000 & wait"},
                    &out);
    REQUIRE(read_line(out, 20s) == "started");
    ::kill(pid, signal_number);
    CHECK(read_line(out, 20s) == "trapped");
    CHECK(wait_child(pid, 20s) == 128 + signal_number);
    close(out);
  }
  asio::io_context io;
  session s(io, test_options(shared_hosts()));
  mutex m(s, path);
  CHECK(run(io, m.async_contenders(asio::use_awaitable)).empty());
}

TEST_CASE("a lock lost while the command runs: the command is gone before the server could expire the session") {
  zk_servers servers;
  int out = -1;
  int pid = spawn({ZKASIO_ZKLOCK, "--hosts", servers.hosts(), "--session-timeout", "2000", "/lost", "--",
                   "sh", "-c", "echo $$; exec sleep 1000"},
                  &out);
  auto command = read_line(out, 20s);
  REQUIRE(!command.empty());
  int command_pid = std::stoi(command);
  // The server stops answering: the session cannot be confirmed any more.
  servers.pause();
  CHECK(wait_child(pid, 20s) == 123);
  CHECK(await_exit(command_pid, 1s));  // gone, while the server is still paused
  servers.resume();
  close(out);
}

TEST_CASE("the margins follow the negotiated session timeout, not the requested one") {
  // The server clamps every session to 2000 ms; zklock asks for 10000. The
  // command ignores SIGTERM, so only the SIGKILL ends it.
  zk_servers servers({.max_session_timeout_ms = 2000});
  int out = -1;
  int pid = spawn({ZKASIO_ZKLOCK, "--hosts", servers.hosts(), "--session-timeout", "10000", "/clamped", "--",
                   "sh", "-c", "trap '' TERM; echo $$; exec sleep 1000"},
                  &out);
  auto command = read_line(out, 20s);
  REQUIRE(!command.empty());
  int command_pid = std::stoi(command);
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
  CHECK(wait_child(pid, 20s) == 123);
  CHECK(since_pause() < 8s);
  MESSAGE("zklock exited " << since_pause().count() << " ms after the pause");
  servers.resume();
  CHECK(await_no_lock_nodes(servers.hosts(), "/clamped"));
  CHECK(gone);
  close(out);
}
