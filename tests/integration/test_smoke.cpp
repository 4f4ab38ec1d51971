// The platform works: the C client reaches the real server and a node can be
// created, read and deleted.
#include <doctest/doctest.h>
#include <unistd.h>

#include "support/raw_client.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;

TEST_CASE("the C client creates, reads and deletes a node on the real server") {
  raw_client client(shared_hosts());
  REQUIRE(client.await_connected());

  const std::string path = "/zkasio-smoke-" + std::to_string(getpid());
  std::string created;
  REQUIRE(client.create(path, "hello", 0, &created) == ZOK);
  CHECK(created == path);
  CHECK(client.create(path, "again") == ZNODEEXISTS);

  std::string data;
  REQUIRE(client.get(path, &data) == ZOK);
  CHECK(data == "hello");

  REQUIRE(client.remove(path) == ZOK);
  CHECK(client.get(path) == ZNONODE);
}
