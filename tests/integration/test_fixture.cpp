// The server fixture itself: servers start, answer, pause, resume, restart and
// stop, leaving nothing running, also when their owner is killed.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/process.hpp"
#include "support/raw_client.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;
using namespace std::chrono_literals;

namespace {

bool answers(const std::string& host) { return four_letter_word(host, "ruok") == "imok"; }

std::string mode(const std::string& host) {
  auto srvr = four_letter_word(host, "srvr");
  auto at = srvr.find("Mode: ");
  return at == std::string::npos ? "" : srvr.substr(at + 6, srvr.find('\n', at) - at - 6);
}

int leaders(const zk_servers& servers) {
  int n = 0;
  for (int i = 1; i <= servers.count(); ++i) n += mode(servers.host(i)) == "leader";
  return n;
}

}  // namespace

TEST_CASE("a standalone server starts, pauses, resumes, restarts and stops") {
  zk_servers servers;
  REQUIRE(servers.count() == 1);
  CHECK(servers.hosts() == servers.host(1));
  CHECK(answers(servers.host(1)));
  CHECK(mode(servers.host(1)) == "standalone");
  // Only what the tests need is enabled, and nothing else listens.
  CHECK(four_letter_word(servers.host(1), "wchc").find("not executed") == std::string::npos);

  servers.pause();
  CHECK(four_letter_word(servers.host(1), "ruok", 500ms) == "");
  servers.resume();
  CHECK(answers(servers.host(1)));

  int before = servers.pid(1);
  servers.restart();
  CHECK(servers.pid(1) != before);
  CHECK_FALSE(process_running(before));
  CHECK(answers(servers.host(1)));

  // Data survives a restart.
  {
    raw_client client(servers.hosts());
    REQUIRE(client.await_connected());
    REQUIRE(client.create("/survivor") == ZOK);
  }
  servers.restart();
  raw_client client(servers.hosts());
  REQUIRE(client.await_connected());
  CHECK(client.get("/survivor") == ZOK);

  int pid = servers.pid(1);
  servers.stop();
  CHECK(await_exit(pid, 1s));
  CHECK_FALSE(answers(servers.host(1)));
}

TEST_CASE("a 3-server ensemble elects a leader, survives a restart of it, and stops") {
  zk_servers servers({.servers = 3});
  REQUIRE(servers.count() == 3);
  for (int i = 1; i <= 3; ++i) CHECK(answers(servers.host(i)));
  CHECK(leaders(servers) == 1);

  int leader = 0;
  for (int i = 1; i <= 3; ++i)
    if (mode(servers.host(i)) == "leader") leader = i;
  REQUIRE(leader != 0);

  int paused = leader % 3 + 1;
  servers.pause(paused);
  CHECK(four_letter_word(servers.host(paused), "ruok", 500ms) == "");
  servers.resume(paused);
  CHECK(answers(servers.host(paused)));

  // Restarting the leader: the script returns once it serves again, and the
  // ensemble has exactly one leader.
  servers.restart(leader);
  for (int i = 1; i <= 3; ++i) CHECK(answers(servers.host(i)));

  raw_client client(servers.hosts());
  REQUIRE(client.await_connected());
  CHECK(client.create("/ensemble") == ZOK);

  int pids[3] = {servers.pid(1), servers.pid(2), servers.pid(3)};
  servers.stop();
  for (int pid : pids) CHECK(await_exit(pid, 1s));
}

TEST_CASE("servers stop by themselves when the owning process is killed") {
  auto dir = std::filesystem::temp_directory_path() / ("zkasio-owner-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  // The owner starts the servers and is then killed without stopping them.
  auto result = run_command({"bash", "-c",
                             "\"$0\" start \"$1\" --servers 3 --owner-pid $$ >/dev/null && kill -9 $$",
                             source_dir() + "/scripts/zk", dir.string()});
  CHECK(result.status == 128 + 9);
  int pids[3];
  for (int i = 0; i < 3; ++i) {
    std::ifstream in(dir / ("s" + std::to_string(i + 1)) / "pid");
    in >> pids[i];
  }
  for (int pid : pids) CHECK(await_exit(pid, 15s));
  int watchdog = -1;
  std::ifstream(dir / "watchdog.pid") >> watchdog;
  if (watchdog > 0) CHECK(await_exit(watchdog, 5s));
  std::filesystem::remove_all(dir);
}
