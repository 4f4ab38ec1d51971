// A Java program beside Debian's Curator and ZooKeeper jars, compiled by
// javac into a temporary folder (removed with the object): the interop
// tests' contender and the chaos suite's Curator workers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace zkasio::test {

class java_program {
 public:
  // Compiles `source` (a path under the source tree, such as
  // "tests/interop/CuratorContender.java"), whose public class is `java_class`;
  // throws std::runtime_error with javac's output if it does not compile.
  java_program(const std::string& source, const std::string& java_class);
  ~java_program();
  java_program(const java_program&) = delete;
  java_program& operator=(const java_program&) = delete;

  // The command line that runs it with `args`.
  std::vector<std::string> with(const std::vector<std::string>& args) const;

 private:
  std::filesystem::path classes_;
  std::vector<std::string> command_;
};

}  // namespace zkasio::test
