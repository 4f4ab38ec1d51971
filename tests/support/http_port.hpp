// A port that is not ZooKeeper's, for the tests of what a client makes of it.
#pragma once

#include <array>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <zkasio/error_code.hpp>

namespace zkasio::test {

// A server on loopback that answers every connection as a web server answers
// bytes it does not understand (ZooKeeper's AdminServer on 8080 is such a
// port), then closes it. On a thread of its own until destroyed.
class http_port {
 public:
  http_port() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~http_port() {
    io_.stop();
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  int connections() const { return connections_; }

 private:
  void accept() {
    acceptor_.async_accept([this](zkasio::error_code ec, asio::ip::tcp::socket peer) {
      if (ec) return;
      ++connections_;
      auto client = std::make_shared<asio::ip::tcp::socket>(std::move(peer));
      auto request = std::make_shared<std::array<char, 64>>();
      client->async_read_some(asio::buffer(*request), [client, request](zkasio::error_code, std::size_t) {
        static const std::string answer =
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        asio::async_write(*client, asio::buffer(answer), [client](zkasio::error_code, std::size_t) {
          zkasio::error_code ignored;
          client->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        });
      });
      accept();
    });
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace zkasio::test
