// The fair locks' decisions, free of I/O: contender node names as Apache
// Curator's lock recipes write them, the queue they form, and what a
// contender does given a listing of the lock's children.
#pragma once

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkasio::detail {

// A sequential node's suffix: the parent's 32-bit counter, which the server
// writes with printf("%010d"), so that past 2^31 it is negative ("-2147483648",
// then on up to "-000000001", then "0000000000" again). Kept as the counter's
// bits: sequences compare in the counter's circular order (sequence_before).
using sequence_number = std::uint32_t;

// True when the counter reached `a` before `b`: `a` is less than half the
// counter's range behind `b` (a queue spans far less than 2^31 creates).
constexpr bool sequence_before(sequence_number a, sequence_number b) noexcept {
  return a != b && static_cast<std::uint32_t>(b - a) < 0x8000'0000u;
}

// The suffix's value, or nullopt unless it is exactly what the server writes.
std::optional<sequence_number> parse_sequence(std::string_view suffix);

// What a contender's node is, by the lock name Curator's recipes put between
// "_c_<uuid>-" and the sequence.
enum class node_kind : std::uint8_t {
  lock,   // "lock-": InterProcessMutex (zkasio::mutex)
  read,   // "__READ__": InterProcessReadWriteLock's readers (zkasio::shared_mutex)
  write,  // "__WRIT__": its writers
  lease,  // "lease-": InterProcessSemaphoreV2's leases (zkasio::semaphore)
  latch,  // "latch-": LeaderLatch's candidates (zkasio::election, fair mode)
};
std::string_view lock_name(node_kind kind) noexcept;

// The kinds of node that form one queue (one recipe's, on one path); the
// others under the path are ignored, as Curator's recipes ignore them.
enum class queue_family : std::uint8_t {
  mutex,       // lock
  read_write,  // read and write, in one sequence space
  semaphore,   // lease (a semaphore's leases, which no rule orders)
  election,    // latch
  race,        // none: the race recipes' one node is the path itself (race_engine)
};
bool in_family(node_kind kind, queue_family family) noexcept;
// Whether two kinds of node are of one recipe's queue.
bool same_family(node_kind a, node_kind b) noexcept;

// Whether a node of kind `other` ahead of mine in the queue keeps mine from
// the lock: every node does, but a reader waits only for writers.
constexpr bool blocks(node_kind mine, node_kind other) noexcept {
  return mine != node_kind::read || other == node_kind::write;
}

// "_c_<uuid>-<lock name><sequence>": Curator's protected name for a contender.
// (The uuid is read out of the name, not kept apart: a listing of thousands
// of contenders holds one string per node.)
struct lock_node {
  std::string name;
  node_kind kind = node_kind::lock;
  sequence_number sequence = 0;

  // The uuid in the name of a parsed node ("" for another name).
  std::string_view uuid() const noexcept;
};

// A random (version 4) UUID in canonical text form; never the same in a
// forked child as in its parent.
std::string make_uuid();

// A contender's uuid as text, held inline: every waiting contender keeps
// one, and a string of 36 characters would be one more allocation each.
class uuid_text {
 public:
  static constexpr std::size_t length = 36;
  uuid_text() = default;
  // The first `length` characters of `text`.
  template <class Text>
    requires std::convertible_to<const Text&, std::string_view>
  uuid_text(const Text& text) {  // NOLINT: converts as a string does
    std::string_view view = text;
    size_ = static_cast<std::uint8_t>(view.copy(chars_.data(), length));
  }
  operator std::string_view() const noexcept { return {chars_.data(), size_}; }
  std::string_view view() const noexcept { return *this; }

 private:
  std::array<char, length> chars_{};
  std::uint8_t size_ = 0;
};
// What a contender passes to a sequential create: "_c_<uuid>-<lock name>".
std::string lock_node_prefix(std::string_view uuid, node_kind kind = node_kind::lock);
// The node's parts, or nullopt for a name that is no contender's node.
std::optional<lock_node> parse_lock_node(std::string_view name);

// The nodes of `family` among `children` in the order the server's counter
// made them (by sequence number, circularly from the widest gap between two
// of them, never by whole name); other children are ignored. A total order
// for any listing, so any garbage sorts safely.
std::vector<lock_node> lock_queue(const std::vector<std::string>& children,
                                  queue_family family = queue_family::mutex);

// One listing as a queue (from lock_queue), shared by every contender of the
// lock object it answers (so N contenders cost one listing).
struct queue_view {
  static constexpr std::uint32_t none = UINT32_MAX;
  std::vector<lock_node> nodes;  // in queue order
  // [i]: nodes before i this process does not know; writers among them.
  std::vector<std::uint32_t> others_before, other_writers_before;
  std::vector<std::uint32_t> writer_before;  // [i]: the nearest write node before i, or none
};
// `known(node)`: whether this process knows the node (see known_nodes.hpp).
queue_view make_view(std::vector<lock_node> queue, const std::function<bool(const lock_node&)>& known);

// What the contender whose node is `mine` does next: "who is my predecessor",
// for every recipe (see blocks). `exempt`: a node of the contender's own
// owner that does not block it (a write holder taking the read lock).
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
lock_verdict decide(const queue_view& queue, const lock_node& mine, std::string_view exempt = {});

// A semaphore's rule (Curator's InterProcessSemaphoreV2): the acquirer that
// holds the semaphore's mutex, whose lease nodes are `mine`, holds them all
// once the leases' children are at most `max` (every child takes a slot, as
// Curator counts them); missing if one of mine is not among them.
enum class room_verdict { granted, wait, missing };
room_verdict room_for(const std::vector<std::string>& children, const std::vector<std::string>& mine,
                      std::size_t max);

// The node with `uuid` in `queue` (from lock_queue), or nullptr: how a
// contender finds its node after a create whose reply was lost.
const lock_node* find_by_uuid(const std::vector<lock_node>& queue, std::string_view uuid);

// The in-process handoff's rule (a mutex with lock_options::local_handoff):
// what a release of the run's node does. It hands the lock to the next
// contender waiting in this process, keeping the node, while the node is sure
// to be there (not lost, the session sure: a grant's own conditions) and,
// once another contender's node was seen queued behind it, for `max_run`
// more handoffs and until `max_time` after that; else the node is deleted
// (and the next local contender queues a node of its own).
struct local_run_budget {
  std::optional<std::chrono::steady_clock::time_point> other_seen{};  // another contender's node behind the run's
  std::size_t handed_since = 0;  // local handoffs since other_seen
};
enum class after_release { hand_off, delete_node };
after_release next_after_release(const local_run_budget& budget, std::size_t max_run,
                                 std::chrono::milliseconds max_time, bool local_waiting, bool node_sure,
                                 std::chrono::steady_clock::time_point now);

}  // namespace zkasio::detail
