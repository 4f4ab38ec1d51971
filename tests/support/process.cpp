#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <stdexcept>

extern char** environ;

namespace zkasio::test {

bool process_running(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

bool await_exit(int pid, std::chrono::milliseconds timeout) {
  // A pidfd becomes readable when the process ends.
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) return true;
    throw std::runtime_error("pidfd_open failed");
  }
  pollfd p{fd, POLLIN, 0};
  int ready = poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return ready == 1;
}

int spawn(const std::vector<std::string>& argv, int* stdout_pipe) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int out[2] = {-1, -1};
  if (stdout_pipe) {
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  }
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (stdout_pipe) {
    close(out[1]);
    *stdout_pipe = out[0];
  }
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  return pid;
}

std::string read_line(int fd, std::chrono::milliseconds timeout) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) return "";
    char c;
    if (read(fd, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line += c;
  }
}

int wait_child(int pid, std::chrono::milliseconds timeout) {
  bool ended = await_exit(pid, timeout);
  if (!ended) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace zkasio::test
