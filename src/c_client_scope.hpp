// Every call into the C client runs inside a c_client_scope: the library
// keeps process-wide state (its request id counter is a plain static) that
// sessions on other threads share, so calls are serialized process-wide; and
// the log lines the C client writes during the call go to the calling
// session's sink. Recursive: C callbacks may call into the C client again.
#pragma once

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

}  // namespace zkasio::detail
