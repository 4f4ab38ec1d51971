// The documentation's links (no server): every relative link of README.md
// and of the pages under docs/ names a file that exists, and every anchor a
// heading of the page it points into (GitHub's rule for a heading's anchor);
// every page is linked from the README. The pages' C++ blocks are compiled by
// readme_blocks.cmake.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path source_dir = ZKASIO_SOURCE_DIR;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The page's lines outside fenced code blocks, with inline code removed
// (code mentions brackets and parentheses that are no links).
std::vector<std::pair<int, std::string>> prose_lines(const std::string& text) {
  std::vector<std::pair<int, std::string>> lines;
  std::istringstream in(text);
  std::string line;
  bool fenced = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    lines.emplace_back(number, std::regex_replace(line, std::regex("`[^`]*`"), "code"));
  }
  return lines;
}

// A heading's anchor as GitHub makes it: lower case, only letters, digits,
// spaces, '-' and '_' kept (inline code's text counts), spaces made '-'.
std::string anchor_of(std::string heading) {
  std::string anchor;
  for (char c : heading) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || u >= 0x80) anchor += static_cast<char>(std::tolower(u));
    else if (c == ' ') anchor += '-';
  }
  return anchor;
}

// The anchors of a page's headings; a repeated one gets "-1", "-2", ...
std::set<std::string> anchors_of(const std::string& text) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  std::istringstream in(text);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    auto text_at = line.find_first_not_of('#');
    if (text_at == std::string::npos || line[text_at] != ' ') continue;
    auto anchor = anchor_of(line.substr(text_at + 1));
    int n = seen[anchor]++;
    anchors.insert(n == 0 ? anchor : anchor + "-" + std::to_string(n));
  }
  return anchors;
}

struct link {
  int line;
  std::string target;
};

std::vector<link> links_of(const std::string& text) {
  static const std::regex markdown_link(R"(\]\(([^()\s]+)\))");
  std::vector<link> links;
  for (auto& [number, line] : prose_lines(text))
    for (std::sregex_iterator it(line.begin(), line.end(), markdown_link), end; it != end; ++it)
      links.push_back({number, (*it)[1]});
  return links;
}

// What is wrong with `target`, a link on the page `page` (empty: nothing).
// External links are not followed.
std::string broken(const fs::path& page, const std::string& target) {
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind("mailto:", 0) == 0)
    return {};
  auto hash = target.find('#');
  auto file = target.substr(0, hash);
  auto anchor = hash == std::string::npos ? std::string() : target.substr(hash + 1);
  auto pointed = file.empty() ? page : (page.parent_path() / file).lexically_normal();
  if (!fs::exists(pointed)) return "no such file: " + pointed.string();
  if (anchor.empty()) return {};
  if (pointed.extension() != ".md") return "an anchor into a file that is not a page";
  auto anchors = anchors_of(read_file(pointed));
  if (!anchors.count(anchor)) return "no heading makes the anchor #" + anchor + " in " + pointed.string();
  return {};
}

std::vector<fs::path> pages() {
  std::vector<fs::path> all{source_dir / "README.md"};
  for (auto& entry : fs::recursive_directory_iterator(source_dir / "docs"))
    if (entry.path().extension() == ".md") all.push_back(entry.path());
  std::sort(all.begin() + 1, all.end());
  return all;
}

}  // namespace

TEST_CASE("anchors and links are found as GitHub reads them") {
  CHECK(anchor_of("The fair lock: zkasio::mutex") == "the-fair-lock-zkasiomutex");
  CHECK(anchor_of("In-process handoff: `mutex_options::local_handoff`") ==
        "in-process-handoff-mutex_optionslocal_handoff");
  CHECK(anchor_of("zklock: flock(1) for a ZooKeeper lock") == "zklock-flock1-for-a-zookeeper-lock");
  auto anchors = anchors_of("# Title\n## Errors\n```sh\n# not a heading\n```\n## Errors\n#hashtag\n");
  CHECK(anchors == std::set<std::string>{"title", "errors", "errors-1"});
  auto links = links_of("see [a](x.md#y) and `f](z)` or\n```cpp\nf[0](1);\n```\n![plot](p.png)\n");
  REQUIRE(links.size() == 2);
  CHECK(links[0].target == "x.md#y");
  CHECK(links[1].line == 5);
  CHECK(links[1].target == "p.png");
}

TEST_CASE("a broken link or anchor is reported") {
  auto readme = source_dir / "README.md";
  CHECK(broken(readme, "docs/reference/session.md").empty());
  CHECK(broken(readme, "docs/reference/session.md#operations").empty());
  CHECK(broken(readme, "https://zookeeper.apache.org/").empty());
  CHECK(broken(readme, "docs/no-such-page.md").find("no such file") == 0);
  CHECK(broken(readme, "docs/reference/session.md#no-such-heading").find("no heading") == 0);
  CHECK(broken(readme, "#no-such-heading").find("no heading") == 0);
}

TEST_CASE("every relative link of README.md and docs/ resolves, anchors included") {
  int checked = 0;
  for (auto& page : pages()) {
    for (auto& l : links_of(read_file(page))) {
      CAPTURE(page.string());
      CAPTURE(l.line);
      CAPTURE(l.target);
      CHECK(broken(page, l.target) == "");
      ++checked;
    }
  }
  CHECK(checked > 20);
}

TEST_CASE("every page under docs/ is linked from README.md") {
  std::set<fs::path> linked;
  auto readme = source_dir / "README.md";
  for (auto& l : links_of(read_file(readme)))
    linked.insert((source_dir / l.target.substr(0, l.target.find('#'))).lexically_normal());
  for (auto& page : pages()) {
    if (page == readme) continue;
    CAPTURE(page.string());
    CHECK(linked.count(page.lexically_normal()) == 1);
  }
}
