#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>

#include "recipes/rules/lock_queue.hpp"

namespace zkasio::detail {
namespace {

constexpr std::string_view protected_prefix = "_c_";
constexpr std::size_t uuid_length = uuid_text::length;
constexpr node_kind all_kinds[] = {node_kind::lock, node_kind::read, node_kind::write, node_kind::lease,
                                   node_kind::latch};
// printf("%010d"): ten characters, or eleven from -1,000,000,000 down.
constexpr std::size_t min_sequence_length = 10, max_sequence_length = 11;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool is_uuid(std::string_view s) {
  if (s.size() != uuid_length) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !is_hex(s[i])) return false;
  }
  return true;
}

// Counts the forks of this process and of its ancestors since it started: a
// child's generator must not go on with the parent's state.
std::atomic<unsigned> forks{0};
[[maybe_unused]] const int fork_handler_installed =
    pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); });

}  // namespace

std::optional<sequence_number> parse_sequence(std::string_view s) {
  if (s.size() < min_sequence_length || s.size() > max_sequence_length) return std::nullopt;
  bool negative = s.front() == '-';
  std::int64_t value = 0;
  for (std::size_t i = negative ? 1 : 0; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    value = value * 10 + (s[i] - '0');
  }
  if (negative) value = -value;
  if (value < INT32_MIN || value > INT32_MAX) return std::nullopt;
  // Only the server's own spelling: no "-000000000", no eleven-digit padding.
  char canonical[max_sequence_length + 1];
  std::snprintf(canonical, sizeof canonical, "%010d", static_cast<int>(value));
  if (s != canonical) return std::nullopt;
  return static_cast<sequence_number>(static_cast<std::int32_t>(value));
}

uuid_text make_uuid() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  thread_local unsigned seeded_after = forks.load(std::memory_order_relaxed);
  if (auto now = forks.load(std::memory_order_relaxed); now != seeded_after) {
    random.seed(std::random_device{}());
    seeded_after = now;
  }
  std::uint64_t high = random(), low = random();
  high = (high & ~0xf000ull) | 0x4000ull;                        // version 4
  low = (low & ~(0xc000ull << 48)) | (0x8000ull << 48);          // variant 1
  char text[uuid_length + 1];
  std::snprintf(text, sizeof text, "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xffff),
                static_cast<unsigned>(high & 0xffff), static_cast<unsigned>(low >> 48),
                static_cast<unsigned long long>(low & 0xffffffffffffull));
  return std::string_view(text, uuid_length);
}

std::string_view lock_name(node_kind kind) noexcept {
  switch (kind) {
    case node_kind::read: return "__READ__";
    case node_kind::write: return "__WRIT__";
    case node_kind::lease: return "lease-";
    case node_kind::latch: return "latch-";
    case node_kind::lock: break;
  }
  return "lock-";
}

std::string lock_node_prefix(std::string_view uuid, node_kind kind) {
  std::string prefix;  // (one allocation: one per attempt)
  auto name = lock_name(kind);
  prefix.reserve(protected_prefix.size() + uuid.size() + 1 + name.size());
  prefix.append(protected_prefix).append(uuid).append(1, '-').append(name);
  return prefix;  // (not append's reference: that would be copied)
}

std::string_view lock_node::uuid() const noexcept {
  if (name.size() < protected_prefix.size() + uuid_length) return {};
  return std::string_view(name).substr(protected_prefix.size(), uuid_length);
}

std::optional<lock_node> parse_lock_node(std::string_view name) {
  auto key = parse_lock_node_key(name);
  if (!key) return std::nullopt;
  return lock_node{std::string(name), key->kind, key->sequence};
}

std::optional<lock_node_key> parse_lock_node_key(std::string_view name) {
  const std::size_t head = protected_prefix.size() + uuid_length + 1;  // "_c_<uuid>-"
  if (name.size() < head || name.substr(0, protected_prefix.size()) != protected_prefix ||
      name[head - 1] != '-')
    return std::nullopt;
  auto uuid = name.substr(protected_prefix.size(), uuid_length);
  if (!is_uuid(uuid)) return std::nullopt;
  auto rest = name.substr(head);
  for (auto kind : all_kinds) {
    auto lock = lock_name(kind);
    if (rest.substr(0, lock.size()) != lock) continue;
    auto sequence = parse_sequence(rest.substr(lock.size()));
    if (!sequence) return std::nullopt;
    return lock_node_key{kind, *sequence};
  }
  return std::nullopt;
}

}  // namespace zkasio::detail
