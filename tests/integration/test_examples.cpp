// The examples as their users run them, against a real server:
// - lock_server: three server processes share ten accounts through ZooKeeper
//   locks while 50 connections make 5,000 ADDs; the balances must be exact,
//   also when one server is killed (SIGKILL) halfway: every acknowledged ADD
//   counted, none applied twice.
// - fencing: a holder stopped past its session's expiry wakes up; its late
//   write is refused by the storage, by its fencing token.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/write.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <zkasio/error_code.hpp>

#include "support/async.hpp"
#include "support/lock_test.hpp"
#include "support/process.hpp"
#include "support/session_test.hpp"
#include "support/tcp_proxy.hpp"
#include "support/zk_servers.hpp"

using namespace zkasio;
using namespace zkasio::test;
using namespace std::chrono_literals;
using asio::awaitable;
using asio::ip::tcp;
using asio::experimental::as_tuple;

namespace {

constexpr int connections = 50;
constexpr int adds_per_connection = 100;  // 5,000 in all
constexpr int account_count = 10;

// The lock_server processes, each on a port of its own, with sessions of
// `session_timeout`; killed by pid at the end.
struct lock_servers {
  lock_servers(const std::string& root, std::chrono::milliseconds session_timeout) {
    for (int i = 0; i < 3; ++i) {
      int out = -1;
      int pid = spawn({ZKASIO_LOCK_SERVER, "--hosts", shared_hosts(), "--port", "0", "--root", root,
                       "--session-timeout", std::to_string(session_timeout.count())},
                      &out);
      guards.push_back(std::make_unique<process_guard>(pid));
      auto line = read_line(out, 20s);
      ::close(out);
      REQUIRE_MESSAGE(line.rfind("listening on ", 0) == 0, "lock_server said: ", line);
      ports.push_back(static_cast<unsigned short>(std::stoi(line.substr(13))));
      pids.push_back(pid);
      alive.push_back(true);
    }
  }
  void kill_one(std::size_t i) {
    ::kill(pids[i], SIGKILL);
    alive[i] = false;
  }

  std::vector<std::unique_ptr<process_guard>> guards;
  std::vector<int> pids;
  std::vector<unsigned short> ports;
  std::vector<bool> alive;
};

std::string account_of(int n) { return "account" + std::to_string(n % account_count); }

// What the clients learned, per account: the sum of acknowledged ADDs, and of
// those whose outcome is unknown (ERR, or the connection lost before the reply).
struct tally {
  std::map<std::string, long long> acknowledged, unknown;
  int done = 0;
};

// One connection's requests, each sent once; a lost connection is replaced
// by one to a live server before the next request.
awaitable<void> client(int id, lock_servers& servers, tally& t, bool ones, std::function<void()> progress) {
  auto executor = co_await asio::this_coro::executor;
  tcp::socket socket(executor);
  std::string buffer;
  std::size_t next_server = static_cast<std::size_t>(id);
  for (int i = 0; i < adds_per_connection; ++i) {
    auto account = account_of(id + i);
    long long amount = ones ? 1 : (id * 31 + i) % 11 - 5;
    while (!socket.is_open()) {
      auto k = next_server++ % servers.ports.size();
      if (!servers.alive[k]) continue;
      auto [ec] = co_await socket.async_connect({asio::ip::make_address("127.0.0.1"), servers.ports[k]},
                                                as_tuple(asio::use_awaitable));
      if (ec) socket.close();
      buffer.clear();
    }
    auto request = "ADD " + account + " " + std::to_string(amount) + "\n";
    auto [write_ec, written] = co_await asio::async_write(socket, asio::buffer(request), as_tuple(asio::use_awaitable));
    zkasio::error_code read_ec = write_ec;
    std::size_t n = 0;
    if (!write_ec)
      std::tie(read_ec, n) = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), '\n',
                                                             as_tuple(asio::use_awaitable));
    if (read_ec) {
      socket.close();
      t.unknown[account] += amount;
    } else {
      auto reply = buffer.substr(0, n - 1);
      buffer.erase(0, n);
      if (reply.rfind("OK ", 0) == 0) {
        t.acknowledged[account] += amount;
      } else {
        MESSAGE("ADD ", account, ": ", reply);
        t.unknown[account] += amount;
      }
    }
    ++t.done;
    progress();
  }
}

// The balances as a live server tells them.
awaitable<std::map<std::string, long long>> balances(lock_servers& servers) {
  tcp::socket socket(co_await asio::this_coro::executor);
  std::size_t k = 0;
  while (!servers.alive[k]) ++k;
  co_await socket.async_connect({asio::ip::make_address("127.0.0.1"), servers.ports[k]}, asio::use_awaitable);
  std::map<std::string, long long> result;
  std::string buffer;
  for (int a = 0; a < account_count; ++a) {
    auto request = "GET " + account_of(a) + "\n";
    co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
    auto n = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), '\n', asio::use_awaitable);
    auto reply = buffer.substr(0, n - 1);
    buffer.erase(0, n);
    REQUIRE_MESSAGE(reply.rfind("OK ", 0) == 0, "GET said: ", reply);
    result[account_of(a)] = std::stoll(reply.substr(3));
  }
  co_return result;
}

// 5,000 ADDs over 50 connections; `kill_at` completed ADDs, one server is killed.
tally load(lock_servers& servers, bool ones, std::optional<int> kill_at) {
  asio::io_context io;
  tally t;
  auto progress = [&] {
    if (kill_at && t.done == *kill_at) servers.kill_one(0);
  };
  run(io, [&]() -> awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    test_event all(executor, connections);
    for (int id = 0; id < connections; ++id)
      asio::co_spawn(executor, client(id, servers, t, ones, progress), [&](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
        all.count();
      });
    REQUIRE(co_await all.wait(180s));
  }(), 200s);
  return t;
}

}  // namespace

TEST_CASE("lock_server: 3 servers, 50 connections, 5,000 ADDs over 10 accounts: the balances are exact") {
  // The example's default session: with no fault, no lock may be lost.
  // (With a 2 s one, on a loaded machine, a few were: a lost signal fires
  // 1.8 s after last_contact(), which lags the answers by the tick assumed,
  // a second, and the heartbeat's quarter second; half a second of delay
  // in this process, or in the server's, was enough.)
  lock_servers servers(unique_path("lock-server-exact"), 10s);
  auto t = load(servers, false, std::nullopt);
  asio::io_context io;
  auto final = run(io, balances(servers));
  CHECK(t.done == connections * adds_per_connection);
  for (int a = 0; a < account_count; ++a) {
    auto account = account_of(a);
    CAPTURE(account);
    CHECK(t.unknown[account] == 0);
    CHECK(final[account] == t.acknowledged[account]);
  }
  // Told to stop, each server closes its session and ends by itself.
  for (std::size_t i = 0; i < servers.pids.size(); ++i) {
    ::kill(servers.pids[i], SIGTERM);
    CHECK(wait_child(servers.pids[i], 15s) == 0);
    servers.alive[i] = false;
  }
}

TEST_CASE("lock_server: one of 3 servers killed halfway: every acknowledged ADD is in the balance, none applied twice") {
  // A short session: the killed server's locks go with it soon. A lock lost
  // meanwhile costs an ADD an unknown outcome, which this case allows.
  lock_servers servers(unique_path("lock-server-kill"), 2s);
  // Every ADD adds 1: a balance above acknowledged + unknown would be an ADD applied twice.
  auto t = load(servers, true, connections * adds_per_connection / 2);
  asio::io_context io;
  auto final = run(io, balances(servers));
  CHECK(t.done == connections * adds_per_connection);
  long long unknown = 0;
  for (int a = 0; a < account_count; ++a) {
    auto account = account_of(a);
    CAPTURE(account);
    CHECK(final[account] >= t.acknowledged[account]);
    CHECK(final[account] <= t.acknowledged[account] + t.unknown[account]);
    unknown += t.unknown[account];
  }
  MESSAGE("ADDs whose outcome the clients could not know (in flight at the kill): ", unknown);
}

// Started before its ZooKeeper server serves sessions (as a service started
// beside its ZooKeeper, or during a rolling restart, meets it: here every
// connection is closed at once until the server is let through), it waits
// and then serves (before: its first create failed with connection_loss and
// it exited 0). A failure ends it with a status that says so.
TEST_CASE("lock_server: started before its server is ready, it serves once the server is; a failure exits non-zero") {
  zk_servers server;
  tcp_proxy proxy(server.host(1));
  proxy.refuse_connections(true);
  int out = -1;
  process_guard early(spawn({ZKASIO_LOCK_SERVER, "--hosts", proxy.address(), "--port", "0", "--root",
                             unique_path("lock-server-early"), "--session-timeout", "4000"},
                            &out));
  REQUIRE(poll_until([&] { return proxy.connections_accepted() >= 2; }, 20s));  // tried, and was turned away
  proxy.refuse_connections(false);
  auto line = read_line(out, 20s);
  ::close(out);
  REQUIRE_MESSAGE(line.rfind("listening on ", 0) == 0, "lock_server said: ", line);
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    tcp::socket client(io);
    co_await client.async_connect({asio::ip::make_address("127.0.0.1"),
                                   static_cast<unsigned short>(std::stoi(line.substr(13)))},
                                  asio::use_awaitable);
    std::string request = "ADD early 5\n", reply;
    co_await asio::async_write(client, asio::buffer(request), asio::use_awaitable);
    auto n = co_await asio::async_read_until(client, asio::dynamic_buffer(reply), '\n', asio::use_awaitable);
    CHECK(reply.substr(0, n).rfind("OK 5 ", 0) == 0);
  }());
  ::kill(early.pid(), SIGTERM);
  CHECK(wait_child(early.pid(), 15s) == 0);

  // A root it may not make (under an ephemeral node): it says why and exits 1.
  auto ephemeral = unique_path("lock-server-ephemeral");
  session s(io, test_options(server.hosts()));
  run(io, s.async_create(ephemeral, "", create_options(create_mode::ephemeral), asio::use_awaitable));
  process_guard failing(spawn({ZKASIO_LOCK_SERVER, "--hosts", server.hosts(), "--port", "0", "--root",
                               ephemeral + "/under"}));
  CHECK(wait_child(failing.pid(), 20s) == 1);
  // A usage error: 2.
  CHECK(wait_child(spawn({ZKASIO_LOCK_SERVER, "-v"}), 10s) == 2);
}

TEST_CASE("fencing: a holder stopped past its session's expiry wakes up, and the storage refuses its late write by its token") {
  auto first_line = [](int fd) { return read_line(fd, 30s); };
  int storage_out = -1;
  process_guard storage(spawn({ZKASIO_FENCING, "storage", "--port", "0"}, &storage_out));
  auto listening = first_line(storage_out);
  REQUIRE(listening.rfind("listening on ", 0) == 0);
  auto port = listening.substr(13);
  auto lock_path = unique_path("fencing");
  auto client = [&](bool on_sigcont) {
    std::vector<std::string> argv{ZKASIO_FENCING, "client", "--hosts", shared_hosts(), "--lock", lock_path,
                                  "--storage", port, "--session-timeout", "2000"};
    if (on_sigcont) argv.push_back("--on-sigcont");
    return argv;
  };
  auto token_of = [](const std::string& granted) {
    REQUIRE_MESSAGE(granted.rfind("granted ", 0) == 0, "the client said: ", granted);
    return std::stoll(granted.substr(8));
  };

  int a_out = -1;
  process_guard a(spawn(client(true), &a_out));
  auto a_token = token_of(first_line(a_out));
  ::kill(a.pid(), SIGSTOP);  // the holder's long pause
  asio::io_context io;
  session observer(io, test_options(shared_hosts()));
  REQUIRE(run(io, settles_at(observer, lock_path, 0, 20s), 30s));  // its session expired

  int b_out = -1;
  process_guard b(spawn(client(false), &b_out));
  auto b_token = token_of(first_line(b_out));
  CHECK(b_token > a_token);
  CHECK(first_line(b_out) == "OK");
  CHECK(wait_child(b.pid(), 20s) == 0);

  ::kill(a.pid(), SIGCONT);  // it wakes up believing it holds the lock, and writes
  CHECK(first_line(a_out) == "REFUSED " + std::to_string(b_token));
  CHECK(wait_child(a.pid(), 20s) == 1);
  for (int fd : {storage_out, a_out, b_out}) ::close(fd);
}

TEST_CASE("lock_metrics: wait and hold histograms of every round, in Prometheus' text format") {
  int out = -1;
  auto path = unique_path("lock-metrics");
  process_guard metrics(spawn({ZKASIO_LOCK_METRICS, "--hosts", shared_hosts(), "--lock", path, "--contenders", "3",
                               "--rounds", "4"},
                              &out));
  std::map<std::string, std::string> values;  // "name{labels}" -> value
  std::vector<std::string> wait_buckets;
  for (;;) {
    auto line = read_line(out, 30s);
    if (line.empty()) break;
    if (line[0] == '#') continue;
    auto space = line.rfind(' ');
    values[line.substr(0, space)] = line.substr(space + 1);
    if (line.rfind("zkasio_lock_wait_seconds_bucket", 0) == 0) wait_buckets.push_back(line.substr(space + 1));
  }
  CHECK(wait_child(metrics.pid(), 30s) == 0);
  ::close(out);
  auto of = [&](const std::string& name) { return values["zkasio_lock_" + name + "{path=\"" + path + "\"}"]; };
  CHECK(of("wait_seconds_count") == "12");
  CHECK(of("hold_seconds_count") == "12");
  CHECK(of("failed_total") == "0");
  CHECK(of("lost_total") == "0");
  CHECK(std::stod(of("hold_seconds_sum")) >= 12 * 0.001);  // each held at least 1 ms
  // Cumulative buckets, the last (+Inf) the count.
  REQUIRE(wait_buckets.size() == 8);
  for (std::size_t i = 1; i < wait_buckets.size(); ++i) CHECK(std::stoul(wait_buckets[i - 1]) <= std::stoul(wait_buckets[i]));
  CHECK(wait_buckets.back() == "12");
  asio::io_context io;
  session observer(io, test_options(shared_hosts()));
  CHECK(run(io, settles_at(observer, path, 0, 20s), 30s));
}
