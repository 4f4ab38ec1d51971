// Waiting for processes to end, by pid, without polling; jobs on a terminal.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace zkasio::test {

bool process_running(int pid);
// Waits until process `pid` (not necessarily a child) has ended; false when
// `timeout` passed first.
bool await_exit(int pid, std::chrono::milliseconds timeout);

// Starts a child process (stderr inherited; stdout too, unless `stdout_pipe`
// is given: then it receives the read end of a pipe from the child's stdout).
int spawn(const std::vector<std::string>& argv, int* stdout_pipe = nullptr);
// Reads one line from `fd`, waiting at most `timeout`; "" if none came.
std::string read_line(int fd, std::chrono::milliseconds timeout);
// Waits for the child `pid` and returns its exit status (128+N when killed by
// signal N); a child still running after `timeout` is killed and -1 returned.
int wait_child(int pid, std::chrono::milliseconds timeout);

// The state letter of process `pid` in /proc/<pid>/stat ('S' sleeping, 'T'
// stopped, 'Z' zombie, ...); 0 when there is no such process.
char process_state(int pid);
// The parent of process `pid`; -1 when there is no such process.
int parent_pid(int pid);

// Ends a process a test started indirectly (it knows only the pid), when the
// guard goes out of scope: SIGKILL to it, and to the process group it leads,
// unless it has ended already.
class process_guard {
 public:
  explicit process_guard(int pid = -1) : pid_(pid) {}
  ~process_guard();
  process_guard(const process_guard&) = delete;
  process_guard& operator=(const process_guard&) = delete;
  int pid() const { return pid_; }

 private:
  int pid_;
};

// A job run by a small job-control shell (python3) on a pseudo-terminal, as
// an interactive shell runs it: the shell is the session leader with the
// terminal as its controlling terminal, the job runs in its own process
// group, given the terminal (foreground) or not (background). Or the job
// leads a session of its own on the terminal, with no shell in it (as under
// ssh -t). The terminal does not echo and writes lines with a bare \n. Like
// a shell, it takes the terminal back when the job stops. What the shell sees
// of the job comes as reports: "stopped N" (stopped by signal N),
// "continued", "exit N" (128+N when killed by signal N). The destructor ends
// whatever is left, by pid.
class terminal_job {
 public:
  enum class mode { foreground, background, session_leader };
  terminal_job(const std::vector<std::string>& argv, mode m);
  ~terminal_job();
  terminal_job(const terminal_job&) = delete;
  terminal_job& operator=(const terminal_job&) = delete;

  int pid() const { return job_; }  // the job's process (its process group's leader)
  void type(std::string_view keys);  // as typed on the keyboard: "\x03" is Ctrl-C, "\x1a" Ctrl-Z
  // A line written to the terminal; "" if none came within `timeout`.
  std::string read_line(std::chrono::milliseconds timeout);
  // Everything written to the terminal until it closed (the shell ended);
  // throws if it did not close within `timeout`.
  std::string read_rest(std::chrono::milliseconds timeout);
  // The shell's next report; "" if none came within `timeout`.
  std::string next_report(std::chrono::milliseconds timeout);
  // The job's exit status (reports before it are skipped); -1 after `timeout`.
  int wait_exit(std::chrono::milliseconds timeout);
  void fg();  // as the shell's fg: the terminal to the job's group, then SIGCONT to it

 private:
  void tell(std::string_view command);
  void end();

  int master_ = -1, reports_ = -1, commands_ = -1;
  int shell_ = -1, job_ = -1;
  bool exited_ = false;
};

}  // namespace zkasio::test
