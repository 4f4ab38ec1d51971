// Real ZooKeeper servers for the tests, run through scripts/zk.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace zkasio::test {

struct server_options {
  int servers = 1;          // 1 (standalone) or 3 (an ensemble on loopback)
  bool force_sync = false;  // tests need no durability; the bench uses the default (yes)
  int tick_time_ms = 200;   // sessions expire in tick buckets: small ticks, fast expiry tests
  int max_session_timeout_ms = 60000;  // the server clamps every session's timeout to this
};

// Private servers owned by one test: started by the constructor, stopped by the
// destructor (also when the test fails). The test process is their owner: if it
// dies, scripts/zk's watchdog stops them.
class zk_servers {
 public:
  explicit zk_servers(server_options options = {});
  ~zk_servers();
  zk_servers(const zk_servers&) = delete;
  zk_servers& operator=(const zk_servers&) = delete;

  const std::string& hosts() const { return hosts_; }  // the connect string of all servers
  std::string host(int server) const;                   // "127.0.0.1:port" of server 1..n
  int count() const { return static_cast<int>(ports_.size()); }
  int pid(int server) const;
  const std::string& dir() const { return dir_; }

  // server 0 means every server.
  void pause(int server = 0);    // SIGSTOP: the server keeps its sockets but answers nothing
  void resume(int server = 0);   // SIGCONT
  void restart(int server = 0);  // stop and start again with the same data
  void stop();                   // stops all; idempotent

 private:
  void run(std::vector<std::string> args) const;

  std::string dir_;
  std::string hosts_;
  std::vector<int> ports_;
  bool running_ = false;
};

// The servers for ordinary tests: ZKASIO_TEST_HOSTS when set (checked to answer,
// else the test process fails at once with a message naming the address), or a
// private standalone server shared by the whole test process, started on first use.
const std::string& shared_hosts();

// Sends a four-letter word to "host:port" and returns the answer ("" when no answer
// came within the timeout).
std::string four_letter_word(std::string_view host, std::string_view word,
                             std::chrono::milliseconds timeout = std::chrono::seconds(2));

// How many watches the server at "host:port" holds, data and child watches of
// every session (mntr's zk_watch_count; wchc lists data watches only); -1
// when it does not answer.
int watch_count(std::string_view host);

// Runs a command and returns its exit status (128+N when killed by signal N) and
// what it printed on stdout and stderr.
struct command_result {
  int status = -1;
  std::string output;
};
command_result run_command(const std::vector<std::string>& argv);

// The directory of the project's source tree (for scripts/).
std::string source_dir();

}  // namespace zkasio::test
