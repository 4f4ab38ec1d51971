#include "support/zk_servers.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace zkasio::test {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> split(const std::string& s, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

// A socket connected to "host:port" within `timeout`, or -1. Numeric hosts only:
// tests never resolve names.
int connect_to(std::string_view address, std::chrono::milliseconds timeout) {
  auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return -1;
  std::string host(address.substr(0, colon)), port(address.substr(colon + 1));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, freeaddrinfo);
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int error = 0;
  socklen_t length = sizeof error;
  if (poll(&p, 1, static_cast<int>(timeout.count())) != 1 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

std::string source_dir() { return ZKASIO_SOURCE_DIR; }

command_result run_command(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  command_result result;
  if (spawned != 0) {
    close(out[0]);
    result.output = argv[0] + ": " + std::strerror(spawned);
    return result;
  }
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) result.output.append(buffer, static_cast<std::size_t>(n));
    else if (errno != EINTR) break;
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string four_letter_word(std::string_view host, std::string_view word,
                             std::chrono::milliseconds timeout) {
  int fd = connect_to(host, timeout);
  if (fd < 0) return {};
  std::string answer;
  if (send(fd, word.data(), word.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(word.size())) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) break;
      ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;  // the server closes after answering
      answer.append(buffer, static_cast<std::size_t>(n));
    }
  }
  close(fd);
  return answer;
}

int watch_count(std::string_view host) {
  std::istringstream lines(four_letter_word(host, "mntr"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("zk_watch_count\t", 0) == 0) return std::stoi(line.substr(line.find('\t') + 1));
  return -1;
}

zk_servers::zk_servers(server_options options) {
  char pattern[] = "/tmp/zkasio-test-XXXXXX";
  if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  run({"start", "--servers", std::to_string(options.servers), "--force-sync",
       options.force_sync ? "yes" : "no", "--tick-time", std::to_string(options.tick_time_ms),
       "--max-session-timeout", std::to_string(options.max_session_timeout_ms),
       "--owner-pid", std::to_string(getpid())});
  running_ = true;
  hosts_ = trim(read_file(dir_ + "/hosts"));
  for (auto& host : split(hosts_, ','))
    ports_.push_back(std::stoi(host.substr(host.rfind(':') + 1)));
}

zk_servers::~zk_servers() {
  try {
    stop();
    // For a post-mortem: the servers' logs and data stay where they were.
    if (const char* keep = std::getenv("ZKASIO_KEEP_SERVERS"); keep && *keep)
      std::cerr << "zk_servers: kept " << dir_ << '\n';
    else
      std::filesystem::remove_all(dir_);
  } catch (const std::exception& e) {
    std::cerr << "zk_servers: " << e.what() << '\n';
  }
}

void zk_servers::run(std::vector<std::string> args) const {
  std::vector<std::string> argv{source_dir() + "/scripts/zk", args.front(), dir_};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  auto result = run_command(argv);
  if (result.status != 0)
    throw std::runtime_error("scripts/zk " + args.front() + " failed (" +
                             std::to_string(result.status) + "): " + result.output);
}

std::string zk_servers::host(int server) const {
  return "127.0.0.1:" + std::to_string(ports_.at(static_cast<std::size_t>(server - 1)));
}

int zk_servers::pid(int server) const {
  auto text = trim(read_file(dir_ + "/s" + std::to_string(server) + "/pid"));
  return text.empty() ? -1 : std::stoi(text);
}

static std::vector<std::string> with_server(const char* command, int server) {
  if (server == 0) return {command};
  return {command, "--server", std::to_string(server)};
}

void zk_servers::pause(int server) { run(with_server("pause", server)); }
void zk_servers::resume(int server) { run(with_server("resume", server)); }
void zk_servers::restart(int server) { run(with_server("restart", server)); }

void zk_servers::stop() {
  if (!running_) return;
  running_ = false;
  run({"stop"});
}

const std::string& shared_hosts() {
  static const std::string hosts = [] {
    if (const char* given = std::getenv("ZKASIO_TEST_HOSTS"); given && *given) {
      for (auto& host : split(given, ','))
        if (trim(four_letter_word(host, "ruok")) != "imok") {
          std::cerr << "ZKASIO_TEST_HOSTS: no ZooKeeper server answers at " << host << '\n';
          std::_Exit(2);
        }
      return std::string(given);
    }
    static zk_servers servers;  // stopped at exit; the watchdog covers a crash
    return servers.hosts();
  }();
  return hosts;
}

}  // namespace zkasio::test
