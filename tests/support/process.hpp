// Waiting for processes to end, by pid, without polling.
#pragma once

#include <chrono>
#include <string>
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

}  // namespace zkasio::test
