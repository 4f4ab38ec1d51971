// The test proxy itself, driven by the ZooKeeper C client against the real
// server: it forwards, holds replies back, drops connections, cuts a connection
// right after the server executed a request, and refuses connections.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zookeeper/proto.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include "support/raw_client.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;
using namespace std::chrono_literals;

namespace {

// Every wait is bounded: a bug fails, never hangs. raw_client's waits default to
// the same 5 s.
constexpr auto wait_limit = 5s;

// The proxy forwards to one server: the first of the shared connect string.
std::string upstream() {
  const auto& hosts = shared_hosts();
  return hosts.substr(0, hosts.find(','));
}

std::string unique_path(const std::string& what) {
  static std::mt19937_64 random{std::random_device{}()};
  return "/zkasio-proxy-" + what + "-" + std::to_string(getpid()) + "-" +
         std::to_string(random());
}

// Connection losses are what these tests cause: the C client would log each
// as an error. The assertions say what went wrong.
struct client : raw_client {
  explicit client(const std::string& hosts) : raw_client(hosts, 10000, quiet) {}
};

// A connected client through a proxy, and one straight to the proxy's server
// to look behind its back.
struct proxied {
  tcp_proxy proxy{upstream()};
  client c{proxy.address()};
  client direct{upstream()};
  proxied() {
    REQUIRE(c.await_connected());
    REQUIRE(direct.await_connected());
  }
};

// Asks `direct` whether `path` exists until it does, pumping `other` meanwhile
// (so that its requests go out); false when it did not appear in time.
bool appears(raw_client& direct, const std::string& path, raw_client& other) {
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto r = direct.exists_async(path);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!run_until({&other, &direct}, [&] { return r->done(); }, left)) return false;
    if (r->rc() == ZOK) return true;
    if (r->rc() != ZNONODE) return false;
  }
  return false;
}

}  // namespace

TEST_CASE("proxy: in pass mode a client creates, reads and deletes a node through it") {
  tcp_proxy proxy(upstream());
  CHECK(proxy.address().rfind("127.0.0.1:", 0) == 0);
  CHECK(proxy.address() != upstream());
  CHECK(proxy.connections_accepted() == 0);
  CHECK(proxy.connections_open() == 0);

  client c(proxy.address());
  REQUIRE(c.await_connected());
  CHECK(proxy.connections_accepted() == 1);
  CHECK(proxy.connections_open() == 1);

  const auto path = unique_path("pass");
  std::string created;
  REQUIRE(c.create(path, "through the proxy", 0, &created) == ZOK);
  CHECK(created == path);
  CHECK(c.create(path) == ZNODEEXISTS);
  std::string read;
  REQUIRE(c.get(path, &read) == ZOK);
  CHECK(read == "through the proxy");

  // Frames far larger than one read are reassembled whole, both ways.
  std::string big(600 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i * 7 % 26);
  const auto big_path = path + "-big";
  REQUIRE(c.create(big_path, big) == ZOK);
  std::string big_read;
  REQUIRE(c.get(big_path, &big_read) == ZOK);
  CHECK(big_read == big);

  CHECK(c.remove(big_path) == ZOK);
  CHECK(c.remove(path) == ZOK);
  CHECK(c.exists(path) == ZNONODE);
  CHECK(proxy.connections_accepted() == 1);  // one connection all along
}

TEST_CASE("proxy: only a loopback upstream is accepted") {
  CHECK_THROWS_AS(tcp_proxy("192.0.2.1:2181"), std::invalid_argument);
  CHECK_THROWS_AS(tcp_proxy("localhost:2181"), std::invalid_argument);
  CHECK_THROWS_AS(tcp_proxy("127.0.0.1"), std::invalid_argument);
  CHECK_THROWS_AS(tcp_proxy("127.0.0.1:99999"), std::invalid_argument);
  CHECK_NOTHROW(tcp_proxy("127.0.0.1:2181"));  // nothing is connected until a client comes
}

TEST_CASE_FIXTURE(proxied, "proxy: hold_replies keeps replies back until pass(), in order") {
  const auto path = unique_path("hold");

  proxy.hold_replies();
  const auto created = c.create_async(path, "held");
  // The request reaches the server, which executes it...
  REQUIRE(appears(direct, path, c));
  const auto read = c.get_async(path);
  // ...and one more round trip of the direct client later, after which both
  // replies would long have arrived, the client still has neither.
  CHECK(direct.exists(path) == ZOK);
  CHECK_FALSE(created->done());
  CHECK_FALSE(read->done());
  CHECK(c.connected());

  proxy.pass();
  REQUIRE(c.run_until([&] { return created->done() && read->done(); }));
  CHECK(created->rc() == ZOK);
  CHECK(read->rc() == ZOK);
  CHECK(read->value() == "held");
  CHECK(created->order() < read->order());
  CHECK(c.connected());
  CHECK(proxy.connections_accepted() == 1);  // the connection survived the hold

  CHECK(direct.remove(path) == ZOK);
}

TEST_CASE_FIXTURE(proxied, "proxy: fail_replies makes the next replies of a type say an error; the connection stands") {
  const auto path = unique_path("fail");
  CHECK(direct.create(path, "x") == ZOK);
  proxy.fail_replies(ZOO_GETDATA_OP, ZTHROTTLEDOP, 2);
  const auto first = c.get_async(path);
  const auto second = c.get_async(path);
  const auto third = c.get_async(path);
  REQUIRE(c.run_until([&] { return first->done() && second->done() && third->done(); }));
  CHECK(first->rc() == ZTHROTTLEDOP);
  CHECK(second->rc() == ZTHROTTLEDOP);
  CHECK(third->rc() == ZOK);
  CHECK(third->value() == "x");
  CHECK(c.connected());
  CHECK(proxy.connections_accepted() == 1);
  CHECK(direct.remove(path) == ZOK);
}

TEST_CASE_FIXTURE(proxied, "proxy: drop_now closes the connection; the client loses it and reconnects") {
  const auto session = c.session_id();
  const auto path = unique_path("drop");

  // A request the server has executed but whose reply is still held: in flight.
  proxy.hold_replies();
  const auto created = c.create_async(path);
  REQUIRE(appears(direct, path, c));
  CHECK_FALSE(created->done());

  proxy.drop_now();
  CHECK(proxy.connections_open() == 0);
  proxy.pass();
  REQUIRE(c.run_until([&] { return created->done(); }));
  CHECK(created->rc() == ZCONNECTIONLOSS);  // the held reply was discarded
  CHECK(c.saw(ZOO_CONNECTING_STATE));

  // The client reconnects through the proxy, to the same session.
  REQUIRE(c.await_connected());
  CHECK(proxy.connections_accepted() == 2);
  CHECK(proxy.connections_open() == 1);
  CHECK(c.session_id() == session);
  CHECK(c.exists(path) == ZOK);
  CHECK(c.remove(path) == ZOK);
}

TEST_CASE_FIXTURE(proxied, "proxy: drop_after_next_request cuts the connection after the server executed it") {
  const auto path = unique_path("cut");
  const auto later = path + "-later";

  CHECK_FALSE(proxy.wait_cut(10ms));  // nothing armed, nothing cut
  proxy.drop_after_next_request(ZOO_CREATE_OP);
  CHECK_FALSE(proxy.wait_cut(10ms));
  // A request of another type goes through untouched.
  CHECK(c.exists(path) == ZNONODE);
  CHECK_FALSE(proxy.wait_cut(10ms));

  const auto created = c.create_async(path, "executed");
  REQUIRE(c.run_until([&] { return created->done(); }));
  CHECK(created->rc() == ZCONNECTIONLOSS);  // the client never learned the result...
  CHECK(proxy.wait_cut(wait_limit));
  CHECK(c.saw(ZOO_CONNECTING_STATE));
  std::string read;  // ...but the server did create the node
  CHECK(direct.get(path, &read) == ZOK);
  CHECK(read == "executed");

  // The cut was one-shot: after reconnecting, a create goes through.
  REQUIRE(c.await_connected());
  CHECK(proxy.connections_accepted() == 2);
  CHECK(c.create(later) == ZOK);
  CHECK(c.exists(path) == ZOK);

  CHECK(direct.remove(path) == ZOK);
  CHECK(direct.remove(later) == ZOK);
}

TEST_CASE("proxy: drop_after_next_request() without a type cuts whatever request comes next") {
  tcp_proxy proxy(upstream());
  client c(proxy.address());
  REQUIRE(c.await_connected());

  proxy.drop_after_next_request();
  CHECK(c.exists("/") == ZCONNECTIONLOSS);
  CHECK(proxy.wait_cut(wait_limit));

  // Arming again waits for a new cut.
  REQUIRE(c.await_connected());
  proxy.drop_after_next_request();
  CHECK_FALSE(proxy.wait_cut(10ms));
  CHECK(c.get("/") == ZCONNECTIONLOSS);
  CHECK(proxy.wait_cut(wait_limit));
  REQUIRE(c.await_connected());
  CHECK(c.exists("/") == ZOK);
  CHECK(proxy.connections_accepted() == 3);
}

TEST_CASE("proxy: refuse_connections keeps a new client out until it is lifted") {
  tcp_proxy proxy(upstream());
  proxy.refuse_connections(true);
  client c(proxy.address());

  // The client tries again and again, and never gets a session.
  REQUIRE(c.run_until([&] { return proxy.connections_accepted() >= 3; }));
  CHECK_FALSE(c.connected());
  CHECK_FALSE(c.saw(ZOO_CONNECTED_STATE));
  CHECK(proxy.connections_open() == 0);

  proxy.refuse_connections(false);
  REQUIRE(c.await_connected());
  CHECK(proxy.connections_open() == 1);
  CHECK(c.exists("/") == ZOK);
}

TEST_CASE("proxy: destroying the proxy closes its connections") {
  std::optional<tcp_proxy> proxy(std::in_place, upstream());
  client c(proxy->address());
  REQUIRE(c.await_connected());
  proxy.reset();
  CHECK(c.run_until([&] { return c.saw(ZOO_CONNECTING_STATE); }));
}
