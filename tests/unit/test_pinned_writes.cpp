// Every write of the lock engine goes through a session pinned to the
// ZooKeeper session it was decided in (session::pinned; docs/design.md):
// the rule that no write decided in a session is sent in another, checked
// on the engine's sources (no server), so that a write added without its pin
// fails here. The pin itself is tested against a real server
// (test_session_state's "a pinned write is refused ...").
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path source_dir = ZKASIO_SOURCE_DIR;

// The write calls (`.async_create(`, ...) of the files under src/recipes,
// each with its file, line and the line's text.
struct write_call {
  std::string where, text;
};
std::vector<write_call> write_calls() {
  static const std::regex write(R"(\.async_(create|remove|set_data|multi)\()");
  std::vector<write_call> calls;
  for (auto& entry : fs::recursive_directory_iterator(source_dir / "src" / "recipes")) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      auto code = line.substr(0, line.find("//"));
      if (std::regex_search(code, write))
        calls.push_back({entry.path().lexically_relative(source_dir).string() + ":" + std::to_string(number), code});
    }
  }
  return calls;
}

}  // namespace

TEST_CASE("every write of the lock engine is sent through a session pinned to the one it was decided in") {
  auto calls = write_calls();
  // (A rewrite that moved the writes elsewhere would pass vacuously.)
  CHECK(calls.size() >= 6);
  for (auto& call : calls) {
    CAPTURE(call.where);
    CAPTURE(call.text);
    // `x.pinned(generation).async_...(` or a pinned view's `pinned.async_...(`.
    CHECK(call.text.find("pinned") != std::string::npos);
  }
}
