#include "c_client_scope.hpp"

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
  if (current_options && current_options->log) current_options->log(message);
}

}  // namespace zkasio::detail
