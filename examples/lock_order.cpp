// lock_order: several processes take turns holding one ZooKeeper lock and
// print when they get it. The lock is the recipe of the seed documents written
// out over zkasio::session (ephemeral sequential node, lowest sequence holds,
// each waiter watches only its predecessor); zkasio::mutex will package it.
//
//   lock_order HOSTS LOCK_PATH NAME ROUNDS
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <iostream>
#include <string>
#include <zkasio/session.hpp>

using asio::awaitable;
using asio::use_awaitable;

namespace {

// The sequence number ZooKeeper appended to a sequential node's name.
long sequence_of(const std::string& name) { return std::stol(name.substr(name.size() - 10)); }

// Creates the parents of `path` (containers: the server removes them once empty).
awaitable<void> create_parents(zkasio::session& s, const std::string& path) {
  for (auto slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    std::error_code ec;
    co_await s.async_create(path.substr(0, slash), "", zkasio::create_options(zkasio::create_mode::container),
                            asio::redirect_error(use_awaitable, ec));
    if (ec && ec != zkasio::error::node_exists) throw std::system_error(ec, path.substr(0, slash));
  }
}

awaitable<std::string> acquire(zkasio::session& s, const std::string& lock, const std::string& name) {
  co_await create_parents(s, lock + "/");
  auto mine = co_await s.async_create(lock + "/lock-", name,
                                      zkasio::create_options(zkasio::create_mode::ephemeral_sequential),
                                      use_awaitable);
  auto my_name = mine.path.substr(lock.size() + 1);
  for (;;) {
    auto kids = co_await s.async_get_children(lock, use_awaitable);
    std::vector<std::string> queue;
    for (auto& k : kids.names)
      if (k.rfind("lock-", 0) == 0 && k.size() == 15) queue.push_back(k);
    std::sort(queue.begin(), queue.end(),
              [](auto& a, auto& b) { return sequence_of(a) < sequence_of(b); });
    auto me = std::find(queue.begin(), queue.end(), my_name);
    if (me == queue.begin()) co_return mine.path;
    // Only the predecessor: a release wakes exactly one waiter.
    co_await s.async_wait_deleted(lock + "/" + *(me - 1), use_awaitable);
  }
}

awaitable<void> take_turns(zkasio::session& s, std::string lock, std::string name, int rounds) {
  for (int i = 1; i <= rounds; ++i) {
    auto node = co_await acquire(s, lock, name);
    std::cout << name << " holds the lock (round " << i << ", node " << node.substr(lock.size() + 1)
              << ")" << std::endl;
    asio::steady_timer hold(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
    co_await hold.async_wait(use_awaitable);
    co_await s.async_remove(node, use_awaitable);
  }
  co_await s.async_close(use_awaitable);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: lock_order HOSTS LOCK_PATH NAME ROUNDS\n";
    return 2;
  }
  asio::io_context io;
  zkasio::session s(io, {.hosts = argv[1]});
  int status = 0;
  asio::co_spawn(io, take_turns(s, argv[2], argv[3], std::stoi(argv[4])),
                 [&](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                     std::cerr << argv[3] << ": " << x.what() << '\n';
                     status = 1;
                   }
                   io.stop();
                 });
  io.run();
  return status;
}
