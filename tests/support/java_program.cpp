#include "support/java_program.hpp"

#include <unistd.h>

#include <stdexcept>

#include "support/zk_servers.hpp"

namespace zkasio::test {

java_program::java_program(const std::string& source, const std::string& java_class)
    : classes_(std::filesystem::temp_directory_path() /
               ("zkasio-java-" + java_class + "-" + std::to_string(getpid()))) {
  std::filesystem::create_directories(classes_);
  std::string classpath;
  for (auto* jar : {"curator-framework", "curator-client", "curator-recipes", "zookeeper", "zookeeper-jute", "guava",
                    "slf4j-api", "slf4j-nop", "failureaccess"}) {
    auto file = std::string("/usr/share/java/") + jar + ".jar";
    if (std::filesystem::exists(file)) classpath += (classpath.empty() ? "" : ":") + file;
  }
  auto compiled = run_command({"javac", "-cp", classpath, "-d", classes_.string(), source_dir() + "/" + source});
  if (compiled.status != 0) {
    std::filesystem::remove_all(classes_);
    throw std::runtime_error("javac " + source + " failed: " + compiled.output);
  }
  command_ = {"java", "-cp", classes_.string() + ":" + classpath, java_class};
}

java_program::~java_program() { std::filesystem::remove_all(classes_); }

std::vector<std::string> java_program::with(const std::vector<std::string>& args) const {
  auto argv = command_;
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace zkasio::test
