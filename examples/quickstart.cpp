// Connect, take the lock, work under it, release, close: then io.run()
// returns and the program ends. Usage: quickstart [HOSTS]
#include <asio.hpp>
#include <chrono>
#include <iostream>
#include <zkasio/mutex.hpp>

asio::awaitable<void> lock_and_work(zkasio::session& zk) {
  zkasio::mutex m(zk, "/quickstart/lock");  // its parents are made as containers
  // Suspends on ZooKeeper's watch (no thread blocks); the deadline counts
  // connecting too, so an unreachable server is an error, not a hang.
  auto held = co_await m.async_acquire_for(std::chrono::seconds(10));
  std::cout << "holding " << held.node() << ", fencing token " << held.fencing_token().czxid << std::endl;
  co_await held.async_release();
}

int main(int argc, char** argv) {
  asio::io_context io;
  zkasio::session zk(io, {.hosts = argc > 1 ? argv[1] : "127.0.0.1:2181"});
  int status = 0;
  // with_session closes the session after lock_and_work: until it is closed, a
  // session keeps io.run() going.
  asio::co_spawn(io, zkasio::with_session(zk, lock_and_work), [&](std::exception_ptr failure) {
    try {
      if (failure) std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "quickstart: " << e.what() << std::endl;
      status = 1;
    }
  });
  io.run();
  return status;
}
