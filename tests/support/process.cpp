#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
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

namespace {

// The fields of /proc/<pid>/stat after the name ("S 1234 ..."); "" when there
// is no such process. The name may hold spaces and parentheses.
std::string stat_after_name(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? "" : stat.substr(close + 2);
}

}  // namespace

char process_state(int pid) {
  auto fields = stat_after_name(pid);
  return fields.empty() ? 0 : fields[0];
}

int parent_pid(int pid) {
  std::istringstream fields(stat_after_name(pid));
  char state = 0;
  int parent = -1;
  fields >> state >> parent;
  return fields ? parent : -1;
}

process_guard::~process_guard() {
  if (pid_ <= 0 || !process_running(pid_)) return;
  kill(-pid_, SIGKILL);  // fails harmlessly when it leads no group
  kill(pid_, SIGKILL);
  await_exit(pid_, std::chrono::seconds(5));
}

namespace {

// The job-control shell of terminal_job: argv is REPORT_FD COMMAND_FD
// fg|bg|leader TERMINAL ARGV...; for fg and bg, fd 0-2 are the terminal, its
// controlling terminal; for leader, the job makes it its own.
const char* const job_shell = R"(
import os, select, signal, sys, termios
report_fd, command_fd, mode, terminal, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
shell = mode != "leader"  # else no job control: the job leads its own session
os.set_inheritable(report_fd, False)
os.set_inheritable(command_fd, False)
def report(text):
    os.write(report_fd, (text + "\n").encode())
# As an interactive shell: the terminal's job-control signals are not for it.
job_signals = (signal.SIGTTOU, signal.SIGTTIN, signal.SIGTSTP, signal.SIGINT, signal.SIGQUIT)
for n in job_signals:
    signal.signal(n, signal.SIG_IGN)
tty = 0 if shell else os.open(terminal, os.O_RDWR | os.O_NOCTTY)
attrs = termios.tcgetattr(tty)
attrs[1] &= ~termios.ONLCR
attrs[3] &= ~termios.ECHO
termios.tcsetattr(tty, termios.TCSANOW, attrs)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(wake_w)
pid = os.fork()
if pid == 0:
    try:
        if shell:
            os.setpgid(0, 0)
            if mode == "fg":
                os.tcsetpgrp(0, os.getpid())
        else:
            os.setsid()
            fd = os.open(terminal, os.O_RDWR)  # becomes the controlling terminal
            for n in (0, 1, 2):
                os.dup2(fd, n)
        # Python ignores SIGPIPE and SIGXFSZ itself: the job gets the defaults.
        for n in job_signals + (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(n, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
if shell:
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it and may have run already
    if mode == "fg":
        os.tcsetpgrp(0, pid)
report("pid %d" % pid)
while True:
    readable = select.select([wake_r, command_fd], [], [])[0]
    if wake_r in readable:
        os.read(wake_r, 4096)
    while True:
        p, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        if p == 0:
            break
        if os.WIFSTOPPED(status):
            if shell:
                os.tcsetpgrp(0, os.getpgrp())
            report("stopped %d" % os.WSTOPSIG(status))
        elif os.WIFCONTINUED(status):
            report("continued")
        else:
            report("exit %d" % (os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)))
            sys.exit(0)
    if command_fd in readable:
        commands = os.read(command_fd, 4096).split()
        if not commands:  # the test has gone: so does the job
            os.killpg(pid, signal.SIGKILL)
            sys.exit(1)
        for command in commands:
            if command == b"fg" and shell:
                os.tcsetpgrp(0, pid)
            os.killpg(pid, signal.SIGCONT)
)";

}  // namespace

terminal_job::terminal_job(const std::vector<std::string>& argv, mode m) {
  master_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  char terminal[PATH_MAX];
  if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0 ||
      ptsname_r(master_, terminal, sizeof terminal) != 0) {
    end();
    throw std::runtime_error("no pseudo-terminal");
  }
  int reports[2], commands[2];
  if (pipe2(reports, O_CLOEXEC) != 0) {
    end();
    throw std::runtime_error("pipe failed");
  }
  reports_ = reports[0];
  if (pipe2(commands, O_CLOEXEC) != 0) {
    close(reports[1]);
    end();
    throw std::runtime_error("pipe failed");
  }
  commands_ = commands[1];

  const char* shell_mode = m == mode::foreground ? "fg" : m == mode::background ? "bg" : "leader";
  std::vector<std::string> shell_argv{"/usr/bin/python3",          "-c",       job_shell,
                                      std::to_string(reports[1]), std::to_string(commands[0]),
                                      shell_mode,                  terminal};
  shell_argv.insert(shell_argv.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (auto& a : shell_argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (m != mode::session_leader) {
    // In a new session, opening the terminal makes it the controlling one.
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
    posix_spawn_file_actions_addopen(&actions, 0, terminal, O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&actions, 0, 1);
    posix_spawn_file_actions_adddup2(&actions, 0, 2);
  }
  posix_spawn_file_actions_adddup2(&actions, reports[1], reports[1]);  // clears close-on-exec
  posix_spawn_file_actions_adddup2(&actions, commands[0], commands[0]);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(reports[1]);
  close(commands[0]);
  if (rc != 0) {
    end();
    throw std::runtime_error("cannot start /usr/bin/python3");
  }
  shell_ = pid;
  auto started = zkasio::test::read_line(reports_, std::chrono::seconds(20));
  if (started.rfind("pid ", 0) != 0) {
    end();
    throw std::runtime_error("the job shell did not start the job: '" + started + "'");
  }
  job_ = std::stoi(started.substr(4));
}

terminal_job::~terminal_job() { end(); }

void terminal_job::end() {
  if (job_ > 0 && !exited_ && process_running(job_)) {
    kill(job_, SIGKILL);
    await_exit(job_, std::chrono::seconds(5));
  }
  if (commands_ >= 0) close(commands_);  // the shell ends when the test has gone
  commands_ = -1;
  if (shell_ > 0) wait_child(shell_, std::chrono::seconds(5));  // killed if still there
  shell_ = -1;
  if (reports_ >= 0) close(reports_);
  reports_ = -1;
  if (master_ >= 0) close(master_);
  master_ = -1;
}

void terminal_job::type(std::string_view keys) {
  if (write(master_, keys.data(), keys.size()) != static_cast<ssize_t>(keys.size()))
    throw std::runtime_error("cannot write to the terminal");
}

std::string terminal_job::read_line(std::chrono::milliseconds timeout) {
  return zkasio::test::read_line(master_, timeout);
}

std::string terminal_job::read_rest(std::chrono::milliseconds timeout) {
  std::string rest;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{master_, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1)
      throw std::runtime_error("the terminal did not close; so far: '" + rest + "'");
    char buffer[4096];
    ssize_t n = read(master_, buffer, sizeof buffer);
    if (n <= 0) return rest;  // EIO: no process has the terminal open any more
    rest.append(buffer, static_cast<std::size_t>(n));
  }
}

std::string terminal_job::next_report(std::chrono::milliseconds timeout) {
  auto report = zkasio::test::read_line(reports_, timeout);
  if (report.rfind("exit ", 0) == 0) exited_ = true;
  return report;
}

int terminal_job::wait_exit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return -1;
    auto report = next_report(left);
    if (report.empty()) return -1;
    if (exited_) return std::stoi(report.substr(5));
  }
}

void terminal_job::tell(std::string_view command) {
  std::string line(command);
  line += '\n';
  if (write(commands_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("the job shell is gone");
}

void terminal_job::fg() { tell("fg"); }

}  // namespace zkasio::test
