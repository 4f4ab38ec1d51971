// Uses the installed package: a session that is closed before it connects
// (127.0.0.1:1 has no server) and the error category.
#include <asio/io_context.hpp>
#include <iostream>
#include <zkasio/session.hpp>

int main() {
  asio::io_context io;
  zkasio::session s(io, {.hosts = "127.0.0.1:1"});
  std::error_code closed = zkasio::error::session_closed;
  s.async_close([&](std::error_code ec) { closed = ec; });
  io.run();
  std::error_code ec = zkasio::zk_error::no_node;
  std::cout << ec.category().name() << ": " << ec.message() << '\n';
  return closed ? 1 : 0;
}
