// A zkasio::mutex contender for the cross-process tests: takes the lock
// ROUNDS times, appending "enter NAME" and "exit NAME" to LOG while holding it
// (one O_APPEND write each), so that overlapping holders show.
//
//   lock_contender HOSTS LOCK_PATH NAME ROUNDS LOG
#include <fcntl.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <iostream>
#include <string>
#include <zkasio/mutex.hpp>

namespace {

void append(const std::string& log, const std::string& line) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot write " + log);
  ::close(fd);
}

asio::awaitable<void> contend(zkasio::session& s, std::string path, std::string name, int rounds,
                              std::string log) {
  zkasio::mutex m(s, path, {.data = name});
  for (int i = 0; i < rounds; ++i) {
    auto held = co_await m.async_acquire(asio::use_awaitable);
    append(log, "enter " + name + "\n");
    asio::steady_timer hold(co_await asio::this_coro::executor, std::chrono::milliseconds(2));
    co_await hold.async_wait(asio::use_awaitable);
    append(log, "exit " + name + "\n");
    co_await held.async_release(asio::use_awaitable);
  }
  co_await s.async_close(asio::use_awaitable);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: lock_contender HOSTS LOCK_PATH NAME ROUNDS LOG\n";
    return 2;
  }
  asio::io_context io;
  zkasio::session s(io, {.hosts = argv[1]});
  int status = 0;
  asio::co_spawn(io, contend(s, argv[2], argv[3], std::stoi(argv[4]), argv[5]),
                 [&](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                     std::cerr << argv[3] << ": " << x.what() << '\n';
                   }
                   status = 1;
                   io.stop();
                 });
  io.run();
  return status;
}
