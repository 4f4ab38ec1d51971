#include "support/process.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <stdexcept>

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

}  // namespace zkasio::test
