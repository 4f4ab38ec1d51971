// Every call into the C client runs inside a c_client_scope: the library
// keeps process-wide state (its request id counter and its log buffers are
// plain statics) that sessions on other threads share, so calls are
// serialized process-wide; and the log lines the C client writes during the
// call go to the calling session's sink. Recursive: C callbacks may call into
// the C client again.
//
// What may run under it: the C client's own calls, which are short and do
// no blocking I/O but for three: zookeeper_init2 and a reconnection resolve
// host names (getaddrinfo: numeric addresses cost nothing), and
// zookeeper_close on a connected handle waits for the close request's answer
// (one round trip, at most 1.5 s in the C client; session_impl::close probes
// the connection first). Handlers are never run inside it (completion.hpp
// posts them); the user's log sink is.
#pragma once

#include <cstdint>
#include <mutex>
#include <zkasio/session_options.hpp>

namespace zkasio::detail {

class c_client_scope {
 public:
  explicit c_client_scope(const session_options* options);
  ~c_client_scope();
  c_client_scope(const c_client_scope&) = delete;
  c_client_scope& operator=(const c_client_scope&) = delete;

  // The C client's log callback (it has no context argument).
  static void forward(const char* message);

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  const session_options* previous_;
};

// How the lock was used since the last take (outermost scopes only, while
// counting), for zkasio-bench global-lock: what the serialization costs.
// Off by default: the clock reads would sit on every call into the C client
// (every round of the client pump) for a figure only the benchmark reads.
void count_c_client_lock(bool on) noexcept;
struct c_client_lock_stats {
  std::uint64_t scopes = 0;
  std::uint64_t contended = 0;  // found held by another thread: waited
  std::uint64_t wait_ns = 0;
  std::uint64_t hold_ns = 0;
  std::uint64_t max_hold_ns = 0;
};
c_client_lock_stats take_c_client_lock_stats() noexcept;

}  // namespace zkasio::detail
