// The recipes' rules, free of I/O: one object per recipe (what Curator's
// LockInternalsDriver is to its LockInternals, with InterProcessReadWriteLock's
// readLockPredicate and InterProcessSemaphoreV2's count beside it). A rule
// says which children of a lock path form its recipe's queue, which nodes
// ahead of a contender keep it from the lock, and what the contender does
// given a listing. The fair engine (fair_acquire, known_nodes, the leader's
// view) asks the rule of its recipe and holds no recipe's knowledge itself,
// so a new recipe is one rule here (its node kinds named in lock_queue.hpp)
// and one public header.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipes/rules/lock_queue.hpp"

namespace zkasio::detail {

// The nodes of `family`'s queue among `children` in the order the server's counter
// made them (by sequence number, circularly from the widest gap between two
// of them, never by whole name); other children are ignored. A total order
// for any listing, so any garbage sorts safely. The nodes take their names
// from `children` (moved, not copied).
std::vector<lock_node> lock_queue(std::vector<std::string> children,
                                  queue_family family = queue_family::mutex);
// Where `node` is in `queue` (from lock_queue), or nullopt.
std::optional<std::size_t> position_in(const std::vector<lock_node>& queue, const lock_node& node);


// One listing as a queue (from lock_queue), shared by every contender of the
// lock object it answers (so N contenders cost one listing).
struct queue_view {
  static constexpr std::uint32_t none = UINT32_MAX;
  std::vector<lock_node> nodes;  // in queue order
  // What is before a node (one vector: one allocation per listing).
  struct ahead {
    std::uint32_t others = 0;         // nodes this process does not know
    std::uint32_t other_writers = 0;  // writers among them
    std::uint32_t writer = none;      // the nearest write node, or none
  };
  std::vector<ahead> before;  // [i]: before nodes[i]
};
// `known(node)`: whether this process knows the node (see known_nodes.hpp).
queue_view make_view(std::vector<lock_node> queue, const std::function<bool(const lock_node&)>& known);

// What a contender does next, given a listing: "who is my predecessor".
struct lock_verdict {
  enum kind {
    held,     // nothing ahead of mine blocks it: the lock is granted
    wait,     // wait for `predecessor` to go, then look again
    missing,  // mine is not there (deleted, or its session is gone)
  } what = missing;
  std::string predecessor{};  // with wait: the nearest node ahead that blocks mine
  // With wait: a node this process does not know that would block mine lies
  // ahead of the predecessor, or (for a writer) the predecessor is a writer
  // this process does not know, which may downgrade (its read node would
  // appear at its place): so once the predecessor is gone the queue must be
  // listed again. Otherwise only known nodes can block mine then, and the
  // process knows which.
  bool relist_after = false;
};

class queue_rule {
 public:
  // The rule of the recipe `family`; of the recipe whose queue holds nodes
  // of `kind` (each kind is of one recipe's queue).
  static const queue_rule& of(queue_family family) noexcept;
  static const queue_rule& of(node_kind kind) noexcept;

  // Whether a node of `kind` is of this recipe's queue (the others under the
  // path are ignored, as Curator's recipes ignore them).
  virtual bool in_queue(node_kind kind) const noexcept = 0;
  // Whether a node of kind `other` ahead of mine in the queue keeps mine
  // from the lock.
  virtual bool blocks(node_kind mine, node_kind other) const noexcept;
  // What the contender whose node is `mine`, at `index` of `queue`, does.
  // `exempt`: a node of the contender's own owner that does not block it (a
  // write holder taking the read lock).
  virtual lock_verdict decide(const queue_view& queue, std::uint32_t index, std::string_view exempt) const;

 protected:
  ~queue_rule() = default;
};

// What the contender whose node is `mine` does, by its recipe's rule
// (queue_rule::of(mine.kind)); missing when `mine` is not in `queue`.
lock_verdict decide(const queue_view& queue, const lock_node& mine, std::string_view exempt = {});

// ------------------------------------------------------------------ the rules

// One holder at a time, in queue order: every node ahead blocks mine.
class exclusive_rule : public queue_rule {
 public:
  explicit constexpr exclusive_rule(node_kind kind) noexcept : kind_(kind) {}
  bool in_queue(node_kind kind) const noexcept override { return kind == kind_; }

 private:
  node_kind kind_;
};

// zkasio::mutex (Curator's InterProcessMutex), and its in-process handoff
// (mutex_options::local_handoff): what a release of the run's node does. It
// hands the lock to the next contender waiting in this process, keeping the
// node, while the node is sure to be there (not lost, the session sure: a
// grant's own conditions) and, once another contender's node was seen
// queued behind it, for `max_run` more handoffs and until `max_time` after
// that; else the node is deleted (and the next local contender queues a
// node of its own).
struct local_run_budget {
  std::optional<std::chrono::steady_clock::time_point> other_seen{};  // another contender's node behind the run's
  std::size_t handed_since = 0;  // local handoffs since other_seen
};
enum class after_release { hand_off, delete_node };
class mutex_rule final : public exclusive_rule {
 public:
  constexpr mutex_rule() noexcept : exclusive_rule(node_kind::lock) {}
  after_release next_after_release(const local_run_budget& budget, std::size_t max_run,
                                   std::chrono::milliseconds max_time, bool local_waiting, bool node_sure,
                                   std::chrono::steady_clock::time_point now) const;
};
extern const mutex_rule mutex_queue;

// zkasio::shared_mutex (Curator's InterProcessReadWriteLock): readers and
// writers in one sequence space; a reader waits only for the writers ahead.
class read_write_rule final : public queue_rule {
 public:
  bool in_queue(node_kind kind) const noexcept override;
  bool blocks(node_kind mine, node_kind other) const noexcept override;
  lock_verdict decide(const queue_view& queue, std::uint32_t index, std::string_view exempt) const override;
};
extern const read_write_rule read_write_queue;

// zkasio::semaphore's leases (Curator's InterProcessSemaphoreV2): no lease
// waits for another (decide is not asked of them); the acquirer that holds the semaphore's mutex, whose lease nodes are
// `mine`, holds them all once the leases' children are at most `max` (every
// child takes a slot, as Curator counts them); missing if one of mine is not
// among them.
enum class room_verdict { granted, wait, missing };
class lease_rule final : public exclusive_rule {
 public:
  constexpr lease_rule() noexcept : exclusive_rule(node_kind::lease) {}
  room_verdict room_for(const std::vector<std::string>& children, const std::vector<std::string>& mine,
                        std::size_t max) const;
};
extern const lease_rule lease_queue;

// zkasio::election's fair mode (Curator's LeaderLatch): its candidates'
// queue, led by its first.
extern const exclusive_rule election_queue;

// The race recipes (race_mutex, election's race mode): no queue (their one
// node is the path itself, race_engine).
class no_queue_rule final : public queue_rule {
 public:
  bool in_queue(node_kind) const noexcept override { return false; }
};
extern const no_queue_rule race_queue;

// The node with `uuid` in `queue` (from lock_queue), or nullptr: how a
// contender finds its node after a create whose reply was lost.
const lock_node* find_by_uuid(const std::vector<lock_node>& queue, std::string_view uuid);

}  // namespace zkasio::detail
