// lock_server: a TCP server of account balances, each balance kept in a
// ZooKeeper node and changed only under that account's distributed lock, so
// that any number of these servers can serve the same accounts.
//
//   lock_server --hosts H --port P --root /path [--session-timeout MS]
//
// --port 0 picks a free port; the first line on stdout is "listening on <port>".
// One request per line, one reply per line:
//   ADD <account> <amount>   OK <new balance> <fencing token>
//   GET <account>            OK <balance>
//   anything else            ERR <reason>
// An ADD takes <root>/locks/<account>, reads <root>/accounts/<account>
// ("<balance> <fencing token of its last writer>"), writes the new balance
// with the holder's guarded multi and replies. A write whose reply was lost
// with the connection is resolved by reading the node back: it took effect
// if the node carries this holder's fencing token at the next version, and
// is written again otherwise; so it is applied once. An ADD that cannot tell
// (its lock lost) replies ERR: it may or may not have been applied.
#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <cctype>
#include <charconv>
#include <csignal>
#include <chrono>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <zkasio/mutex.hpp>

using asio::awaitable;
using asio::ip::tcp;
using asio::experimental::as_tuple;
using namespace std::chrono_literals;

namespace {

struct options {
  std::string hosts = "127.0.0.1:2181";
  unsigned short port = 0;
  std::string root = "/lock_server";
  std::chrono::milliseconds session_timeout{10000};
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg != "--hosts" && arg != "--port" && arg != "--root" && arg != "--session-timeout")
      throw std::invalid_argument("unknown option '" + arg + "'");
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + arg);
    std::string value = argv[++i];
    if (arg == "--hosts") o.hosts = value;
    else if (arg == "--port") o.port = static_cast<unsigned short>(std::stoi(value));
    else if (arg == "--root") o.root = value;
    else o.session_timeout = std::chrono::milliseconds(std::stoi(value));
  }
  return o;
}

std::optional<long long> number(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// An account's node: "<balance> <fencing token>", at a version; absent: 0.
struct balance {
  long long amount = 0;
  std::int64_t writer = 0;      // the fencing token of the lock that wrote it
  std::int32_t version = -1;    // -1: no node yet
};

class accounts {
 public:
  accounts(zkasio::session& zk, std::string root) : zk_(zk), root_(std::move(root)) {}

  awaitable<void> prepare() {
    // The parents of the account nodes (the locks' are made by the mutex).
    std::string path;
    for (auto part : {root_.substr(1), std::string("accounts")}) {
      std::stringstream parts(part);
      for (std::string name; std::getline(parts, name, '/');) {
        path += "/" + name;
        auto [ec, made] = co_await zk_.async_create(path, "", as_tuple(asio::use_awaitable));
        if (ec && ec != zkasio::zk_error::node_exists) throw zkasio::system_error(ec, path);
      }
    }
  }

  awaitable<balance> read(const std::string& account) {
    auto [ec, node] = co_await zk_.async_get_data(node_of(account), as_tuple(asio::use_awaitable));
    if (ec == zkasio::zk_error::no_node) co_return balance{};
    if (ec) throw zkasio::system_error(ec, node_of(account));
    std::istringstream fields(node.data);
    balance b;
    fields >> b.amount >> b.writer;
    b.version = node.stat.version;
    co_return b;
  }

  // The ADD: "OK <balance> <token>", or "ERR ...".
  awaitable<std::string> add(const std::string& account, long long amount) {
    zkasio::mutex m(zk_, root_ + "/locks/" + account);
    auto held = co_await m.async_acquire_for(30s);
    auto token = held.fencing_token().czxid;  // (no local handoff here)
    for (;;) {
      auto before = co_await read(account);
      auto after = before.amount + amount;
      auto data = std::to_string(after) + " " + std::to_string(token);
      std::vector<zkasio::multi_op> write;
      if (before.version < 0) write.push_back(zkasio::op::create{node_of(account), data});
      else write.push_back(zkasio::op::set_data{node_of(account), data, before.version});
      auto [ec, results] = co_await held.async_guarded_multi(std::move(write), as_tuple(asio::use_awaitable));
      if (!ec) co_return ok(after, token, held);
      if (ec != zkasio::condition::retryable) co_return fail("write: " + ec.message(), held);
      // Ambiguous: the reply was lost. Under the lock nobody else writes;
      // its token at the next version says whether the write took effect.
      co_await zk_.async_connect();
      auto now = co_await read(account);
      if (held.lost()) co_return fail("the lock may be lost; the write may or may not have taken effect", held);
      if (now.version == before.version + 1 && now.writer == token) co_return ok(after, token, held);
    }
  }

 private:
  std::string node_of(const std::string& account) const { return root_ + "/accounts/" + account; }
  static std::string ok(long long after, std::int64_t token, zkasio::lock& held) {
    held.async_release(asio::detached);
    return "OK " + std::to_string(after) + " " + std::to_string(token);
  }
  static std::string fail(const std::string& why, zkasio::lock& held) {
    held.async_release(asio::detached);
    return "ERR " + why;
  }

  zkasio::session& zk_;
  std::string root_;
};

bool valid_account(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

awaitable<std::string> answer(accounts& book, const std::string& request) {
  std::istringstream words(request);
  std::string verb, account, amount, extra;
  words >> verb >> account >> amount >> extra;
  if (!extra.empty()) co_return "ERR too many words";
  if (verb == "GET" && valid_account(account) && amount.empty())
    co_return "OK " + std::to_string((co_await book.read(account)).amount);
  if (verb == "ADD" && valid_account(account)) {
    auto value = number(amount);
    if (!value) co_return "ERR the amount must be an integer";
    co_return co_await book.add(account, *value);
  }
  co_return "ERR expected ADD <account> <amount> or GET <account>";
}

awaitable<void> serve(tcp::socket client, accounts& book) {
  std::string buffer;
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(client, asio::dynamic_buffer(buffer), '\n',
                                                   as_tuple(asio::use_awaitable));
    if (ec) co_return;  // the client went
    auto request = buffer.substr(0, n - 1);
    buffer.erase(0, n);
    std::string reply;
    try {
      reply = co_await answer(book, request);
    } catch (const zkasio::system_error& e) {
      reply = std::string("ERR ") + e.what();
    }
    reply += '\n';
    co_await asio::async_write(client, asio::buffer(reply), as_tuple(asio::use_awaitable));
  }
}

awaitable<void> listen(tcp::acceptor& acceptor, accounts& book) {
  co_await book.prepare();
  std::cout << "listening on " << acceptor.local_endpoint().port() << std::endl;
  for (;;) {
    auto client = co_await acceptor.async_accept(asio::use_awaitable);
    asio::co_spawn(acceptor.get_executor(), serve(std::move(client), book), asio::detached);
  }
}

}  // namespace

// Exit status: 0 once stopped by SIGINT or SIGTERM; 1 when it failed (its
// ZooKeeper work, say a root it may not create); 2 for a usage error. Started
// before its ZooKeeper server is ready, it waits for it (the session's
// requests wait for the connection) and then listens.
int main(int argc, char** argv) {
  options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "lock_server: " << e.what() << "\nusage: lock_server --hosts H --port P --root /path "
              << "[--session-timeout MS]" << std::endl;
    return 2;
  }
  int status = 0;
  try {
    asio::io_context io;
    zkasio::session zk(io, {.hosts = o.hosts, .session_timeout = o.session_timeout});
    accounts book(zk, o.root);
    tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), o.port});
    asio::signal_set stop(io, SIGINT, SIGTERM);
    // Closed first (its locks' nodes go at once), then the clients' connections
    // stop with the io_context.
    auto shut_down = [&] {
      acceptor.close();
      zk.async_close([&](zkasio::error_code) { io.stop(); });
    };
    stop.async_wait([&](zkasio::error_code, int) { shut_down(); });
    asio::co_spawn(io, listen(acceptor, book), [&](std::exception_ptr e) {
      if (!e || !acceptor.is_open()) return;  // (closed: shutting down)
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "lock_server: " << x.what() << std::endl;
      }
      status = 1;
      stop.cancel();
      shut_down();
    });
    io.run();
  } catch (const std::exception& e) {
    std::cerr << "lock_server: " << e.what() << std::endl;
    return 1;
  }
  return status;
}
