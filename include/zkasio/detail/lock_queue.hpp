// The fair lock's decisions, free of I/O: lock node names as Apache Curator's
// InterProcessMutex writes them, the queue they form, and what a contender
// does given a listing of the lock's children.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkasio::detail {

// "_c_<uuid>-lock-<sequence>": Curator's protected name for a lock node, the
// sequence being the server's 10-digit suffix.
struct lock_node {
  std::string name;
  std::string uuid;
  std::int64_t sequence = 0;
};

// A random (version 4) UUID in canonical text form.
std::string make_uuid();
// What a contender passes to a sequential create: "_c_<uuid>-lock-".
std::string lock_node_prefix(std::string_view uuid);
// The node's parts, or nullopt for a name that is not a lock node.
std::optional<lock_node> parse_lock_node(std::string_view name);

// The lock nodes among `children`, in the order of their sequence numbers
// (never of their whole names); other children are ignored.
std::vector<lock_node> lock_queue(const std::vector<std::string>& children);

// What the contender whose node is `mine` does next.
struct lock_verdict {
  enum kind {
    held,     // mine is first: the lock is granted
    wait,     // wait for `predecessor` to go, then look again
    missing,  // mine is not there (deleted, or its session is gone)
  } what = missing;
  std::string predecessor{};  // with wait: the node just before mine
  // With wait: the predecessor is the only node before mine, so once it is
  // gone mine is first without another listing (nodes below mine only go).
  bool predecessor_is_last = false;
};
lock_verdict decide(const std::vector<lock_node>& queue, std::string_view mine);

// The node with `uuid` in `children`, if any: how a contender finds its node
// after a create whose reply was lost.
std::optional<lock_node> find_by_uuid(const std::vector<std::string>& children,
                                      std::string_view uuid);

}  // namespace zkasio::detail
