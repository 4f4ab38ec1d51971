#include "c_client_scope.hpp"

#include <string_view>

namespace zkasio::detail {
namespace {
std::recursive_mutex c_client_mutex;
thread_local const session_options* current_options = nullptr;
}  // namespace

c_client_scope::c_client_scope(const session_options* options)
    : lock_(c_client_mutex), previous_(current_options) {
  current_options = options;
}

c_client_scope::~c_client_scope() { current_options = previous_; }

void c_client_scope::forward(const char* message) {
  if (!current_options || !current_options->log) return;
  // One of the C client's lines ("Freeing zookeeper resources") comes with
  // its own newline; the sink gets every line without one.
  std::string_view line(message);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  current_options->log(line);
}

}  // namespace zkasio::detail
