// The lock across processes: zkasio processes, and zkasio beside Apache
// Curator's InterProcessMutex (Debian's Curator 5.4), on one path. Every
// holder logs "enter" and "exit" while holding; overlapping holders show as
// an enter that does not follow an exit.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/process.hpp"
#include "support/session_test.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;
using namespace std::chrono_literals;

namespace {

struct contender {
  std::vector<std::string> argv;
  std::string name;
};

// Runs the contenders together; true when all exit 0 and the log shows one
// holder at a time and `rounds` grants for each.
void run_contenders(const std::vector<contender>& contenders, const std::string& log, int rounds) {
  std::vector<int> pids;
  for (auto& c : contenders) pids.push_back(spawn(c.argv));
  for (std::size_t i = 0; i < pids.size(); ++i) {
    CAPTURE(contenders[i].name);
    CHECK(wait_child(pids[i], 240s) == 0);
  }
  std::ifstream in(log);
  std::map<std::string, int> grants;
  std::string holder, line;
  int overlaps = 0, lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    std::istringstream words(line);
    std::string what, who;
    words >> what >> who;
    if (what == "enter") {
      if (!holder.empty()) ++overlaps;
      holder = who;
      ++grants[who];
    } else if (what == "exit") {
      if (holder != who) ++overlaps;
      holder.clear();
    }
  }
  CHECK(overlaps == 0);
  CHECK(lines == static_cast<int>(contenders.size()) * rounds * 2);
  for (auto& c : contenders) {
    CAPTURE(c.name);
    CHECK(grants[c.name] == rounds);
  }
}

std::string temp_log(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() /
              ("zkasio-" + name + "-" + std::to_string(getpid()) + ".log");
  std::filesystem::remove(path);
  return path.string();
}

}  // namespace

TEST_CASE("mutual exclusion across 6 processes") {
  auto log = temp_log("processes");
  auto path = unique_path("mutex-processes");
  constexpr int rounds = 200;
  std::vector<contender> contenders;
  for (int i = 0; i < 6; ++i) {
    auto name = "zkasio-" + std::to_string(i);
    contenders.push_back({{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, name,
                           std::to_string(rounds), log},
                          name});
  }
  run_contenders(contenders, log, rounds);
  std::filesystem::remove(log);
}

TEST_CASE("Curator's InterProcessMutex and zkasio exclude each other on one path") {
  // Compile the Curator contender with the machine's Java and Debian's jars.
  auto classes = std::filesystem::temp_directory_path() / ("zkasio-curator-" + std::to_string(getpid()));
  std::filesystem::create_directories(classes);
  std::string classpath;
  for (auto* jar : {"curator-framework", "curator-client", "curator-recipes", "zookeeper",
                    "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop", "failureaccess"}) {
    auto file = std::string("/usr/share/java/") + jar + ".jar";
    if (std::filesystem::exists(file)) classpath += (classpath.empty() ? "" : ":") + file;
  }
  auto compiled = run_command({"javac", "-cp", classpath, "-d", classes.string(),
                               source_dir() + "/tests/interop/CuratorContender.java"});
  INFO(compiled.output);
  REQUIRE(compiled.status == 0);

  auto log = temp_log("interop");
  auto path = unique_path("mutex-interop");
  constexpr int rounds = 30;
  std::vector<contender> contenders;
  for (int i = 0; i < 2; ++i) {
    auto zk = "zkasio-" + std::to_string(i), curator = "curator-" + std::to_string(i);
    contenders.push_back({{ZKASIO_LOCK_CONTENDER, shared_hosts(), path, zk, std::to_string(rounds), log}, zk});
    contenders.push_back({{"java", "-cp", classes.string() + ":" + classpath, "CuratorContender",
                           shared_hosts(), path, curator, std::to_string(rounds), log},
                          curator});
  }
  run_contenders(contenders, log, rounds);
  std::filesystem::remove(log);
  std::filesystem::remove_all(classes);
}
