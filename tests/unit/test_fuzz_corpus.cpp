// Every seed of the fuzz corpus (tests/fuzz/corpus/<target>/) through its
// target's checks, in the default build: an input that once failed stays a
// regression test (see tests/fuzz/fuzz_check.hpp). A failed check aborts.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/zk_servers.hpp"

void fuzz_lock_names(const std::uint8_t* data, std::size_t size);
void fuzz_paths(const std::uint8_t* data, std::size_t size);
void fuzz_frames(const std::uint8_t* data, std::size_t size);
void fuzz_node_data(const std::uint8_t* data, std::size_t size);

namespace {

// Runs `target` on every file of the corpus `name`; how many there were.
template <class Target>
int replay(const std::string& name, Target target) {
  int seeds = 0;
  for (auto& entry : std::filesystem::directory_iterator(zkasio::test::source_dir() + "/tests/fuzz/corpus/" + name)) {
    std::ifstream file(entry.path(), std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    INFO(entry.path().string());
    target(bytes.data(), bytes.size());
    ++seeds;
  }
  return seeds;
}

}  // namespace

TEST_CASE("the fuzz corpus: every seed passes its target's checks") {
  CHECK(replay("lock_names", fuzz_lock_names) >= 2);
  CHECK(replay("paths", fuzz_paths) >= 3);
  CHECK(replay("frames", fuzz_frames) >= 2);
  CHECK(replay("node_data", fuzz_node_data) >= 2);
}
