// Lock-node names and the queue's order, on any listing: parse_lock_node
// never crashes and parses back what lock_node_prefix writes; lock_queue
// keeps exactly the valid names of its family, in one circular order of
// their sequence numbers (near and past 2^31 included), whatever garbage
// surrounds them.
#include <algorithm>
#include <string>
#include <vector>

#include "recipes/rules/lock_queue.hpp"
#include "recipes/rules/queue_rule.hpp"

#include "fuzz/fuzz_check.hpp"

using namespace zkasio::detail;

void fuzz_lock_names(const std::uint8_t* data, std::size_t size) {
  // The input is a listing: one child name per line.
  std::vector<std::string> children(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') children.emplace_back();
    else children.back() += static_cast<char>(data[i]);
  }
  for (auto& name : children) {
    auto node = parse_lock_node(name);
    if (!node) continue;
    FUZZ_CHECK(node->name == name);
    // What a contender creates, with the server's suffix, is this name again.
    auto prefix = lock_node_prefix(node->uuid(), node->kind);
    FUZZ_CHECK(name.substr(0, prefix.size()) == prefix);
    auto sequence = parse_sequence(std::string_view(name).substr(prefix.size()));
    FUZZ_CHECK(sequence && *sequence == node->sequence);
  }
  for (auto family : {queue_family::mutex, queue_family::read_write, queue_family::semaphore,
                      queue_family::election}) {
    auto queue = lock_queue(children, family);
    const auto& rule = queue_rule::of(family);
    // Exactly the valid names of the family, each once.
    std::size_t expected = 0;
    for (auto& name : children)
      if (auto node = parse_lock_node(name); node && rule.in_queue(node->kind)) ++expected;
    FUZZ_CHECK(queue.size() == expected);
    for (auto& node : queue) {
      FUZZ_CHECK(rule.in_queue(node.kind));
      FUZZ_CHECK(std::count(children.begin(), children.end(), node.name) >= 1);
    }
    // One circular order: the distances from the first, as the counter runs, never decrease.
    for (std::size_t i = 1; i < queue.size(); ++i)
      FUZZ_CHECK(static_cast<std::uint32_t>(queue[i].sequence - queue[0].sequence) >=
                 static_cast<std::uint32_t>(queue[i - 1].sequence - queue[0].sequence));
    // The same listing in another order gives the same queue.
    auto reversed = children;
    std::reverse(reversed.begin(), reversed.end());
    auto again = lock_queue(reversed, family);
    FUZZ_CHECK(again.size() == queue.size());
    for (std::size_t i = 0; i < queue.size(); ++i) FUZZ_CHECK(again[i].sequence == queue[i].sequence);
  }
}

ZKASIO_FUZZ_TARGET(fuzz_lock_names)
