// Waiting for processes to end, by pid, without polling.
#pragma once

#include <chrono>

namespace zkasio::test {

bool process_running(int pid);
// Waits until process `pid` (not necessarily a child) has ended; false when
// `timeout` passed first.
bool await_exit(int pid, std::chrono::milliseconds timeout);

}  // namespace zkasio::test
