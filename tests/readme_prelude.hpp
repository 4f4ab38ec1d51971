// What the README's C++ blocks take for granted (see readme_blocks.cmake):
// the headers a user includes, the hosts of the test's server, and the
// application's own functions that the fragments call (declared only:
// fragments are compiled, not linked).
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <zkasio/election.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/session.hpp>
#include <zkasio/shared_mutex.hpp>

// The README's programs name 127.0.0.1:2181; the test names its own server.
inline std::string readme_hosts() {
  const char* hosts = std::getenv("ZKASIO_README_HOSTS");
  return hosts ? hosts : "127.0.0.1:2181";
}

asio::awaitable<void> work();
asio::awaitable<void> write_somewhere(zkasio::fence_token fencing_token);
asio::awaitable<void> read_catalog(zkasio::fence_token fencing_token);
asio::awaitable<void> rewrite_catalog();
asio::awaitable<void> run_transcoder();
asio::awaitable<void> run_job(zkasio::fence_token fencing_token);
asio::awaitable<void> refresh_cache(zkasio::fence_token fencing_token);
asio::awaitable<void> update_balance(const std::string& account, long amount, zkasio::fence_token fencing_token);
