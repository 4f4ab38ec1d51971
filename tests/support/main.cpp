// The test runner: doctest, after checking the servers named by ZKASIO_TEST_HOSTS
// (so a wrong address fails at once, by name, instead of hanging every test).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

#include "support/zk_servers.hpp"

int main(int argc, char** argv) {
  if (const char* given = std::getenv("ZKASIO_TEST_HOSTS"); given && *given)
    zkasio::test::shared_hosts();
  doctest::Context context(argc, argv);
  return context.run();
}
