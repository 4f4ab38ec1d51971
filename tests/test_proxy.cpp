// The test proxy itself, driven by the ZooKeeper C client against the real
// server: it forwards, holds replies back, drops connections, cuts a connection
// right after the server executed a request, and refuses connections.
#include <doctest/doctest.h>
#include <poll.h>
#include <unistd.h>
#include <zookeeper/proto.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio::test;
using namespace std::chrono_literals;

namespace {

constexpr auto wait_limit = 5s;  // every wait is bounded: a bug fails, never hangs

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

// The outcome of one asynchronous call.
struct result {
  bool done = false;
  int rc = 1;     // no ZooKeeper code is positive
  int order = 0;  // 1 for the first call of this client to complete, 2 for the next...
  std::string value;
};

// A C client (single-threaded library) pumped by pump() below.
class client {
 public:
  explicit client(const std::string& hosts, int session_timeout_ms = 10000) {
    // Connection losses are what these tests cause: the C client would log
    // each as an error. The assertions say what went wrong.
    zoo_set_debug_level(static_cast<ZooLogLevel>(0));
    zh_ = zookeeper_init(hosts.c_str(), &client::on_session_event, session_timeout_ms, nullptr,
                         this, 0);
    if (!zh_) throw std::runtime_error("zookeeper_init failed for " + hosts);
  }
  // Pending calls complete (ZCLOSING) inside zookeeper_close, before results_ goes.
  ~client() { zookeeper_close(zh_); }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  zhandle_t* handle() const { return zh_; }
  bool connected() const { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }
  bool saw(int state) const {
    return std::find(states_.begin(), states_.end(), state) != states_.end();
  }
  std::int64_t session_id() const { return zoo_client_id(zh_)->client_id; }

  result& create(const std::string& path, const std::string& data = {}) {
    auto& r = add();
    submitted(r, zoo_acreate(
                     zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                     &ZOO_OPEN_ACL_UNSAFE, 0,
                     [](int rc, const char* value, const void* context) {
                       auto& r = complete(rc, context);
                       if (rc == ZOK && value) r.value = value;
                     },
                     &r));
    return r;
  }
  result& get(const std::string& path) {
    auto& r = add();
    submitted(r, zoo_aget(
                     zh_, path.c_str(), 0,
                     [](int rc, const char* value, int length, const Stat*, const void* context) {
                       auto& r = complete(rc, context);
                       if (rc == ZOK && value) r.value.assign(value, static_cast<std::size_t>(length));
                     },
                     &r));
    return r;
  }
  result& exists(const std::string& path) {
    auto& r = add();
    submitted(r, zoo_aexists(
                     zh_, path.c_str(), 0,
                     [](int rc, const Stat*, const void* context) { complete(rc, context); }, &r));
    return r;
  }
  result& remove(const std::string& path) {
    auto& r = add();
    submitted(r, zoo_adelete(
                     zh_, path.c_str(), -1,
                     [](int rc, const void* context) { complete(rc, context); }, &r));
    return r;
  }

 private:
  struct tagged : result {
    client* owner = nullptr;
  };

  result& add() {
    results_.push_back(std::make_unique<tagged>());
    results_.back()->owner = this;
    return *results_.back();
  }
  void submitted(result& r, int rc) {
    if (rc != ZOK) {  // the C client did not take the call
      r.done = true;
      r.rc = rc;
      r.order = ++completed_;
    }
  }
  static result& complete(int rc, const void* context) {
    auto& r = *static_cast<tagged*>(const_cast<void*>(context));
    r.done = true;
    r.rc = rc;
    r.order = ++r.owner->completed_;
    return r;
  }
  static void on_session_event(zhandle_t*, int type, int state, const char*, void* self) {
    if (type == ZOO_SESSION_EVENT) static_cast<client*>(self)->states_.push_back(state);
  }

  zhandle_t* zh_ = nullptr;
  std::vector<int> states_;  // session states the watcher was told of, in order
  std::deque<std::unique_ptr<tagged>> results_;
  int completed_ = 0;
};

// Runs the clients' event loops (zookeeper_interest, poll, zookeeper_process)
// until done() holds; false when `timeout` passed first.
bool pump(const std::vector<client*>& clients, const std::function<bool()>& done,
          std::chrono::milliseconds timeout = wait_limit) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    std::vector<pollfd> fds;
    std::vector<client*> active;
    for (auto* c : clients) {
      int fd = -1;
      int interest = 0;
      timeval tv{};
      const int rc = zookeeper_interest(c->handle(), &fd, &interest, &tv);
      if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) continue;  // e.g. expired
      active.push_back(c);
      wait_ms = std::min<long long>(wait_ms, tv.tv_sec * 1000LL + (tv.tv_usec + 999) / 1000);
      pollfd p{fd, 0, 0};  // a negative fd is ignored by poll(): the client waits for tv
      if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
      if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
      fds.push_back(p);
    }
    if (active.empty()) return done();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait_ms, 0))) < 0)
      return done();
    for (std::size_t i = 0; i < active.size(); ++i) {
      int events = 0;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
      if (fds[i].revents & POLLOUT) events |= ZOOKEEPER_WRITE;
      zookeeper_process(active[i]->handle(), events);
    }
  }
  return true;
}

bool pump(client& c, const std::function<bool()>& done) { return pump({&c}, done); }

bool await_connected(client& c) {
  return pump(c, [&] { return c.connected(); });
}

// Waits for one call; its code, or ZOPERATIONTIMEOUT when it did not complete.
int finish(client& c, const result& r) {
  pump(c, [&] { return r.done; });
  return r.done ? r.rc : ZOPERATIONTIMEOUT;
}

// Asks `direct` whether `path` exists until it does, pumping `others` meanwhile
// (so that their requests go out); false when it did not appear in time.
bool appears(client& direct, const std::string& path, std::vector<client*> others) {
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  auto all = std::move(others);
  all.push_back(&direct);
  while (std::chrono::steady_clock::now() < deadline) {
    auto& r = direct.exists(path);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!pump(all, [&] { return r.done; }, left)) return false;
    if (r.rc == ZOK) return true;
    if (r.rc != ZNONODE) return false;
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
  REQUIRE(await_connected(c));
  CHECK(proxy.connections_accepted() == 1);
  CHECK(proxy.connections_open() == 1);

  const auto path = unique_path("pass");
  auto& created = c.create(path, "through the proxy");
  REQUIRE(finish(c, created) == ZOK);
  CHECK(created.value == path);
  CHECK(finish(c, c.create(path)) == ZNODEEXISTS);
  auto& read = c.get(path);
  REQUIRE(finish(c, read) == ZOK);
  CHECK(read.value == "through the proxy");

  // Frames far larger than one read are reassembled whole, both ways.
  std::string big(600 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i * 7 % 26);
  const auto big_path = path + "-big";
  REQUIRE(finish(c, c.create(big_path, big)) == ZOK);
  auto& big_read = c.get(big_path);
  REQUIRE(finish(c, big_read) == ZOK);
  CHECK(big_read.value == big);

  CHECK(finish(c, c.remove(big_path)) == ZOK);
  CHECK(finish(c, c.remove(path)) == ZOK);
  CHECK(finish(c, c.exists(path)) == ZNONODE);
  CHECK(proxy.connections_accepted() == 1);  // one connection all along
}

TEST_CASE("proxy: only a loopback upstream is accepted") {
  CHECK_THROWS_AS(tcp_proxy("192.0.2.1:2181"), std::invalid_argument);
  CHECK_THROWS_AS(tcp_proxy("localhost:2181"), std::invalid_argument);
  CHECK_THROWS_AS(tcp_proxy("127.0.0.1"), std::invalid_argument);
  CHECK_THROWS_AS(tcp_proxy("127.0.0.1:99999"), std::invalid_argument);
  CHECK_NOTHROW(tcp_proxy("127.0.0.1:2181"));  // nothing is connected until a client comes
}

TEST_CASE("proxy: hold_replies keeps replies back until pass(), in order") {
  tcp_proxy proxy(upstream());
  client c(proxy.address());
  client direct(upstream());
  REQUIRE(await_connected(c));
  REQUIRE(await_connected(direct));
  const auto path = unique_path("hold");

  proxy.hold_replies();
  auto& created = c.create(path, "held");
  // The request reaches the server, which executes it...
  REQUIRE(appears(direct, path, {&c}));
  auto& read = c.get(path);
  // ...and one more round trip of the direct client later, after which both
  // replies would long have arrived, the client still has neither.
  CHECK(finish(direct, direct.exists(path)) == ZOK);
  CHECK_FALSE(created.done);
  CHECK_FALSE(read.done);
  CHECK(c.connected());

  proxy.pass();
  REQUIRE(pump(c, [&] { return created.done && read.done; }));
  CHECK(created.rc == ZOK);
  CHECK(read.rc == ZOK);
  CHECK(read.value == "held");
  CHECK(created.order < read.order);
  CHECK(c.connected());
  CHECK(proxy.connections_accepted() == 1);  // the connection survived the hold

  CHECK(finish(direct, direct.remove(path)) == ZOK);
}

TEST_CASE("proxy: drop_now closes the connection; the client loses it and reconnects") {
  tcp_proxy proxy(upstream());
  client c(proxy.address());
  client direct(upstream());
  REQUIRE(await_connected(c));
  REQUIRE(await_connected(direct));
  const auto session = c.session_id();
  const auto path = unique_path("drop");

  // A request the server has executed but whose reply is still held: in flight.
  proxy.hold_replies();
  auto& created = c.create(path);
  REQUIRE(appears(direct, path, {&c}));
  CHECK_FALSE(created.done);

  proxy.drop_now();
  CHECK(proxy.connections_open() == 0);
  proxy.pass();
  REQUIRE(pump(c, [&] { return created.done; }));
  CHECK(created.rc == ZCONNECTIONLOSS);  // the held reply was discarded
  CHECK(c.saw(ZOO_CONNECTING_STATE));

  // The client reconnects through the proxy, to the same session.
  REQUIRE(await_connected(c));
  CHECK(proxy.connections_accepted() == 2);
  CHECK(proxy.connections_open() == 1);
  CHECK(c.session_id() == session);
  CHECK(finish(c, c.exists(path)) == ZOK);
  CHECK(finish(c, c.remove(path)) == ZOK);
}

TEST_CASE("proxy: drop_after_next_request cuts the connection after the server executed it") {
  tcp_proxy proxy(upstream());
  client c(proxy.address());
  client direct(upstream());
  REQUIRE(await_connected(c));
  REQUIRE(await_connected(direct));
  const auto path = unique_path("cut");
  const auto later = path + "-later";

  CHECK_FALSE(proxy.wait_cut(10ms));  // nothing armed, nothing cut
  proxy.drop_after_next_request(ZOO_CREATE_OP);
  CHECK_FALSE(proxy.wait_cut(10ms));
  // A request of another type goes through untouched.
  CHECK(finish(c, c.exists(path)) == ZNONODE);
  CHECK_FALSE(proxy.wait_cut(10ms));

  auto& created = c.create(path, "executed");
  REQUIRE(pump(c, [&] { return created.done; }));
  CHECK(created.rc == ZCONNECTIONLOSS);  // the client never learned the result...
  CHECK(proxy.wait_cut(wait_limit));
  CHECK(c.saw(ZOO_CONNECTING_STATE));
  auto& read = direct.get(path);  // ...but the server did create the node
  CHECK(finish(direct, read) == ZOK);
  CHECK(read.value == "executed");

  // The cut was one-shot: after reconnecting, a create goes through.
  REQUIRE(await_connected(c));
  CHECK(proxy.connections_accepted() == 2);
  CHECK(finish(c, c.create(later)) == ZOK);
  CHECK(finish(c, c.exists(path)) == ZOK);

  CHECK(finish(direct, direct.remove(path)) == ZOK);
  CHECK(finish(direct, direct.remove(later)) == ZOK);
}

TEST_CASE("proxy: drop_after_next_request() without a type cuts whatever request comes next") {
  tcp_proxy proxy(upstream());
  client c(proxy.address());
  REQUIRE(await_connected(c));

  proxy.drop_after_next_request();
  CHECK(finish(c, c.exists("/")) == ZCONNECTIONLOSS);
  CHECK(proxy.wait_cut(wait_limit));

  // Arming again waits for a new cut.
  REQUIRE(await_connected(c));
  proxy.drop_after_next_request();
  CHECK_FALSE(proxy.wait_cut(10ms));
  CHECK(finish(c, c.get("/")) == ZCONNECTIONLOSS);
  CHECK(proxy.wait_cut(wait_limit));
  REQUIRE(await_connected(c));
  CHECK(finish(c, c.exists("/")) == ZOK);
  CHECK(proxy.connections_accepted() == 3);
}

TEST_CASE("proxy: refuse_connections keeps a new client out until it is lifted") {
  tcp_proxy proxy(upstream());
  proxy.refuse_connections(true);
  client c(proxy.address());

  // The client tries again and again, and never gets a session.
  REQUIRE(pump(c, [&] { return proxy.connections_accepted() >= 3; }));
  CHECK_FALSE(c.connected());
  CHECK_FALSE(c.saw(ZOO_CONNECTED_STATE));
  CHECK(proxy.connections_open() == 0);

  proxy.refuse_connections(false);
  REQUIRE(await_connected(c));
  CHECK(proxy.connections_open() == 1);
  CHECK(finish(c, c.exists("/")) == ZOK);
}

TEST_CASE("proxy: destroying the proxy closes its connections") {
  std::optional<tcp_proxy> proxy(std::in_place, upstream());
  client c(proxy->address());
  REQUIRE(await_connected(c));
  proxy.reset();
  CHECK(pump(c, [&] { return c.saw(ZOO_CONNECTING_STATE); }));
}
