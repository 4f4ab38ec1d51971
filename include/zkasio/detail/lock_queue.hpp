// The fair lock's decisions, free of I/O: lock node names as Apache Curator's
// InterProcessMutex writes them, the queue they form, and what a contender
// does given a listing of the lock's children.
#pragma once

#include <cstdint>
#include <map>
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

// The lock nodes this process created and has not seen go, by sequence (they
// may be gone: a node not here is only believed gone once seen going). A
// contender below such nodes alone needs no new listing.
using own_nodes = std::map<std::int64_t, std::string>;

// One listing of the lock's children as a queue (from lock_queue), shared by
// every contender of the mutex it answers (so N contenders cost one listing).
struct queue_view {
  std::vector<lock_node> nodes;              // by sequence
  std::vector<std::uint32_t> others_before;  // [i]: nodes before i not in own_nodes
};
queue_view make_view(std::vector<lock_node> queue, const own_nodes& own);

// What the contender whose node is `mine` does next.
struct lock_verdict {
  enum kind {
    held,     // mine is first: the lock is granted
    wait,     // wait for `predecessor` to go, then look again
    missing,  // mine is not there (deleted, or its session is gone)
  } what = missing;
  std::string predecessor{};  // with wait: the node just before mine
  // With wait: a node this mutex does not know lies below the predecessor, so
  // once the predecessor is gone the queue must be listed again. Otherwise
  // only own nodes can be left below mine: see next_own_predecessor.
  bool relist_after = false;
};
lock_verdict decide(const queue_view& queue, const lock_node& mine);

// Once mine's predecessor is gone and no other node was below it: the own node
// just below mine that may still be there, or nullopt when mine is first.
std::optional<std::string> next_own_predecessor(const own_nodes& own, std::int64_t mine);

// The node with `uuid` in `children`, if any: how a contender finds its node
// after a create whose reply was lost.
std::optional<lock_node> find_by_uuid(const std::vector<std::string>& children,
                                      std::string_view uuid);

}  // namespace zkasio::detail
