#include <zkasio/detail/lock_queue.hpp>

#include <algorithm>
#include <cstdio>
#include <random>

namespace zkasio::detail {
namespace {

constexpr std::string_view protected_prefix = "_c_";
constexpr std::string_view lock_name = "-lock-";
constexpr std::size_t uuid_length = 36;
constexpr std::size_t sequence_length = 10;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool is_uuid(std::string_view s) {
  if (s.size() != uuid_length) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !is_hex(s[i])) return false;
  }
  return true;
}

// ZooKeeper's suffix is printf("%010d"): ten digits, or a '-' and nine once
// the parent's counter has wrapped past 2^31.
std::optional<std::int64_t> parse_sequence(std::string_view s) {
  if (s.size() != sequence_length) return std::nullopt;
  bool negative = s.front() == '-';
  std::int64_t value = 0;
  for (std::size_t i = negative ? 1 : 0; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    value = value * 10 + (s[i] - '0');
  }
  return negative ? -value : value;
}

}  // namespace

std::string make_uuid() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  std::uint64_t high = random(), low = random();
  high = (high & ~0xf000ull) | 0x4000ull;                        // version 4
  low = (low & ~(0xc000ull << 48)) | (0x8000ull << 48);          // variant 1
  char text[uuid_length + 1];
  std::snprintf(text, sizeof text, "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xffff),
                static_cast<unsigned>(high & 0xffff), static_cast<unsigned>(low >> 48),
                static_cast<unsigned long long>(low & 0xffffffffffffull));
  return text;
}

std::string lock_node_prefix(std::string_view uuid) {
  return std::string(protected_prefix) + std::string(uuid) + std::string(lock_name);
}

std::optional<lock_node> parse_lock_node(std::string_view name) {
  const std::size_t expected = protected_prefix.size() + uuid_length + lock_name.size() + sequence_length;
  if (name.size() != expected || name.substr(0, protected_prefix.size()) != protected_prefix)
    return std::nullopt;
  auto uuid = name.substr(protected_prefix.size(), uuid_length);
  if (!is_uuid(uuid) || name.substr(protected_prefix.size() + uuid_length, lock_name.size()) != lock_name)
    return std::nullopt;
  auto sequence = parse_sequence(name.substr(name.size() - sequence_length));
  if (!sequence) return std::nullopt;
  return lock_node{std::string(name), std::string(uuid), *sequence};
}

std::vector<lock_node> lock_queue(const std::vector<std::string>& children) {
  std::vector<lock_node> queue;
  for (const auto& child : children)
    if (auto node = parse_lock_node(child)) queue.push_back(std::move(*node));
  std::sort(queue.begin(), queue.end(),
            [](const lock_node& a, const lock_node& b) { return a.sequence < b.sequence; });
  return queue;
}

queue_view make_view(std::vector<lock_node> queue, const own_nodes& own) {
  queue_view view{std::move(queue), {}};
  view.others_before.reserve(view.nodes.size());
  std::uint32_t others = 0;
  for (const auto& node : view.nodes) {
    view.others_before.push_back(others);
    auto known = own.find(node.sequence);
    if (known == own.end() || known->second != node.name) ++others;
  }
  return view;
}

lock_verdict decide(const queue_view& queue, const lock_node& mine) {
  auto& nodes = queue.nodes;
  auto it = std::lower_bound(nodes.begin(), nodes.end(), mine.sequence,
                             [](const lock_node& n, std::int64_t s) { return n.sequence < s; });
  if (it == nodes.end() || it->name != mine.name) return {};
  if (it == nodes.begin()) return {.what = lock_verdict::held};
  auto predecessor = static_cast<std::size_t>(it - nodes.begin()) - 1;
  return {.what = lock_verdict::wait,
          .predecessor = nodes[predecessor].name,
          .relist_after = queue.others_before[predecessor] > 0};
}

std::optional<std::string> next_own_predecessor(const own_nodes& own, std::int64_t mine) {
  auto below = own.lower_bound(mine);
  if (below == own.begin()) return std::nullopt;
  return std::prev(below)->second;
}

std::optional<lock_node> find_by_uuid(const std::vector<std::string>& children,
                                      std::string_view uuid) {
  for (const auto& child : children)
    if (auto node = parse_lock_node(child); node && node->uuid == uuid) return node;
  return std::nullopt;
}

}  // namespace zkasio::detail
