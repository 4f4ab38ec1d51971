// fencing: why a distributed lock needs a fencing token, in two roles.
//
//   fencing storage [--port P]
//       A tiny storage service: "WRITE <token> <data>" replies "OK" when the
//       token is at least the highest it has seen, else "REFUSED <highest>".
//       The first line on stdout is "listening on <port>".
//   fencing client --hosts H --lock PATH --storage PORT [--session-timeout MS] [--on-sigcont]
//       Takes the lock, prints "granted <token>", writes to the storage with
//       its token (at once, or with --on-sigcont when the process is
//       continued after a stop), prints the storage's reply, and exits 0 on
//       OK, 1 when refused.
//
// A holder stopped (SIGSTOP, a long GC pause, a swapped-out VM) past its
// session's expiry still believes it holds the lock when it runs again; in
// the meantime the lock was granted to another, with a higher token. The
// lock alone cannot stop the late write: the storage does, by the token.
#include <asio.hpp>
#include <csignal>
#include <iostream>
#include <sstream>
#include <string>
#include <zkasio/mutex.hpp>

using asio::awaitable;
using asio::ip::tcp;

namespace {

std::string value_after(int& i, int argc, char** argv) {
  if (i + 1 >= argc) throw std::invalid_argument(std::string("missing value after ") + argv[i]);
  return argv[++i];
}

awaitable<void> store(tcp::socket client, std::int64_t& highest) {
  std::string buffer;
  for (;;) {
    auto n = co_await asio::async_read_until(client, asio::dynamic_buffer(buffer), '\n', asio::use_awaitable);
    std::istringstream request(buffer.substr(0, n - 1));
    buffer.erase(0, n);
    std::string verb;
    std::int64_t token = 0;
    std::string reply;
    if (!(request >> verb >> token) || verb != "WRITE") {
      reply = "ERR expected WRITE <token> <data>\n";
    } else if (token < highest) {
      reply = "REFUSED " + std::to_string(highest) + "\n";
    } else {
      highest = token;
      reply = "OK\n";
    }
    co_await asio::async_write(client, asio::buffer(reply), asio::use_awaitable);
  }
}

int storage(int argc, char** argv) {
  unsigned short port = 0;
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--port") port = static_cast<unsigned short>(std::stoi(value_after(i, argc, argv)));
    else throw std::invalid_argument(std::string("unknown option ") + argv[i]);
  }
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), port});
  std::cout << "listening on " << acceptor.local_endpoint().port() << std::endl;
  std::int64_t highest = 0;  // one thread: no lock needed
  asio::co_spawn(io, [&]() -> awaitable<void> {
    for (;;) asio::co_spawn(io, store(co_await acceptor.async_accept(asio::use_awaitable), highest), asio::detached);
  }, asio::detached);
  io.run();
  return 0;
}

struct client_options {
  std::string hosts = "127.0.0.1:2181";
  std::string lock = "/fencing/lock";
  unsigned short storage = 0;
  std::chrono::milliseconds session_timeout{10000};
  bool on_sigcont = false;
};

awaitable<int> write_under_lock(zkasio::session& zk, const client_options& o) {
  auto executor = co_await asio::this_coro::executor;
  zkasio::mutex m(zk, o.lock);
  // (Listening before "granted" is printed: a stop may follow at once.)
  asio::signal_set continued(executor);
  if (o.on_sigcont) continued.add(SIGCONT);
  auto held = co_await m.async_acquire_for(std::chrono::seconds(30));
  std::cout << "granted " << held.fencing_token().czxid << std::endl;
  if (o.on_sigcont) co_await continued.async_wait(asio::use_awaitable);
  // Deliberately no look at held.lost(): the storage must not depend on it.
  tcp::socket storage(executor);
  co_await storage.async_connect({asio::ip::make_address("127.0.0.1"), o.storage}, asio::use_awaitable);
  auto request = "WRITE " + std::to_string(held.fencing_token().czxid) + " hello\n";
  co_await asio::async_write(storage, asio::buffer(request), asio::use_awaitable);
  std::string reply;
  auto n = co_await asio::async_read_until(storage, asio::dynamic_buffer(reply), '\n', asio::use_awaitable);
  reply.resize(n - 1);
  std::cout << reply << std::endl;
  co_return reply == "OK" ? 0 : 1;
}

int client(int argc, char** argv) {
  client_options o;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--hosts") o.hosts = value_after(i, argc, argv);
    else if (arg == "--lock") o.lock = value_after(i, argc, argv);
    else if (arg == "--storage") o.storage = static_cast<unsigned short>(std::stoi(value_after(i, argc, argv)));
    else if (arg == "--session-timeout") o.session_timeout = std::chrono::milliseconds(std::stoi(value_after(i, argc, argv)));
    else if (arg == "--on-sigcont") o.on_sigcont = true;
    else throw std::invalid_argument("unknown option " + arg);
  }
  asio::io_context io;
  zkasio::session zk(io, {.hosts = o.hosts, .session_timeout = o.session_timeout});
  int status = 2;
  asio::co_spawn(io, write_under_lock(zk, o), [&](std::exception_ptr e, int written) {
    status = written;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "fencing: " << x.what() << std::endl;
        status = 2;
      }
    }
    zk.async_close(asio::detached);
  });
  io.run();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string role = argc > 1 ? argv[1] : "";
    if (role == "storage") return storage(argc, argv);
    if (role == "client") return client(argc, argv);
    std::cerr << "usage: fencing storage [--port P] | fencing client --hosts H --lock PATH --storage PORT "
                 "[--session-timeout MS] [--on-sigcont]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "fencing: " << e.what() << std::endl;
    return 2;
  }
}
