// Uses the installed package: a session that is closed before it connects
// (127.0.0.1:1 has no server) and the error category.
#include <asio/io_context.hpp>
#include <iostream>
#include <system_error>
#include <zkasio/session.hpp>

int main() {
  asio::io_context io;
  zkasio::session s(io, {.hosts = "127.0.0.1:1"});
  zkasio::error_code closed = zkasio::error::session_closed;
  s.async_close([&](zkasio::error_code ec) { closed = ec; });
  io.run();
  zkasio::error_code ec = zkasio::zk_error::no_node;
  // (Over Boost.Asio the code's own category() is Boost's interop one: the
  // std::error_code it holds has zkasio's.)
  std::cout << std::error_code(ec).category().name() << ": " << ec.message() << '\n';
  return closed ? 1 : 0;
}
