// Connect, take the lock, work under it, release, close: then io.run()
// returns and the program ends. Usage: quickstart [HOSTS]
#include <asio.hpp>
#include <chrono>
#include <iostream>
#include <zkasio/mutex.hpp>

asio::awaitable<void> work(zkasio::session& zk) {
  zkasio::mutex m(zk, "/quickstart/lock");  // its parents are made as containers
  // Suspends on ZooKeeper's watch (no thread blocks); the deadline counts
  // connecting too, so an unreachable server is an error, not a hang.
  auto held = co_await m.async_acquire_for(std::chrono::seconds(10));
  std::cout << "holding " << held.node() << ", fencing token " << held.fencing_token() << std::endl;
  co_await held.async_release();
}

int main(int argc, char** argv) {
  asio::io_context io;
  zkasio::session zk(io, {.hosts = argc > 1 ? argv[1] : "127.0.0.1:2181"});
  int status = 0;
  asio::co_spawn(io, work(zk), [&](std::exception_ptr failure) {
    try {
      if (failure) std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "quickstart: " << e.what() << std::endl;
      status = 1;
    }
    zk.async_close(asio::detached);  // until it is closed, a session keeps io.run() going
  });
  io.run();
  return status;
}
