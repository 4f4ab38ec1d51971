// The README's complete programs (readme_blocks.cmake) and the quickstart
// example, run against a real server: each must succeed and exit by itself.
#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> readme_programs() {
  std::vector<std::string> programs;
  std::stringstream all(ZKASIO_README_PROGRAMS);
  for (std::string program; std::getline(all, program, ':');)
    if (!program.empty()) programs.push_back(program);
  return programs;
}

struct outcome {
  int status;
  std::string first_line;
};

outcome run_program(const std::vector<std::string>& argv) {
  int out = -1;
  int pid = spawn(argv, &out);
  auto line = read_line(out, 30s);
  // Bounded: a program that does not end is killed and fails the test.
  return {wait_child(pid, 30s), line};
}

}  // namespace

TEST_CASE("every complete program in the README runs against a server and exits by itself") {
  auto programs = readme_programs();
  REQUIRE(programs.size() >= 2);  // the quickstart and the session's example, at least
  setenv("ZKASIO_README_HOSTS", shared_hosts().c_str(), 1);
  for (auto& program : programs) {
    CAPTURE(program);
    auto result = run_program({program});
    CHECK(result.status == 0);
  }
  unsetenv("ZKASIO_README_HOSTS");
}

TEST_CASE("the quickstart takes the lock and exits; without a server it fails by its deadline, saying why") {
  auto held = run_program({ZKASIO_QUICKSTART, shared_hosts()});
  CHECK(held.status == 0);
  CHECK(held.first_line.rfind("holding /quickstart/lock/_c_", 0) == 0);
  auto unreachable = run_program({ZKASIO_QUICKSTART, "127.0.0.1:1"});
  CHECK(unreachable.status == 1);
}
