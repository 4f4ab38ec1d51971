#include "recipes/rules/queue_rule.hpp"

#include <algorithm>

namespace zkasio::detail {

namespace {

// Where a queue starts: after the widest gap between the sequences present,
// going round the counter (sorted by raw value, the wrap gap is last to first).
// `sorted`: by raw sequence. The index of the queue's first node.
std::size_t queue_origin(const std::vector<lock_node>& sorted) {
  if (sorted.empty()) return 0;
  std::size_t origin = 0;
  std::uint32_t widest = static_cast<std::uint32_t>(sorted.front().sequence - sorted.back().sequence);
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    auto gap = static_cast<std::uint32_t>(sorted[i].sequence - sorted[i - 1].sequence);
    if (gap > widest) widest = gap, origin = i;
  }
  return origin;
}

// Queue order within a view whose first sequence is `origin`.
struct queue_order {
  sequence_number origin;
  std::uint32_t key(sequence_number s) const { return s - origin; }
  bool operator()(const lock_node& a, const lock_node& b) const {
    return key(a.sequence) != key(b.sequence) ? key(a.sequence) < key(b.sequence) : a.name < b.name;
  }
};

}  // namespace

std::vector<lock_node> lock_queue(std::vector<std::string> children, queue_family family) {
  std::vector<lock_node> queue;
  queue.reserve(children.size());
  const auto& rule = queue_rule::of(family);
  for (auto& child : children)
    if (auto key = parse_lock_node_key(child); key && rule.in_queue(key->kind))
      queue.push_back({.name = std::move(child), .kind = key->kind, .sequence = key->sequence});
  // Sorted by raw sequence, the queue's order is a rotation of it: the nodes
  // from the origin on, then those the counter wrapped to.
  std::sort(queue.begin(), queue.end(), queue_order{0});
  std::rotate(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(queue_origin(queue)), queue.end());
  return queue;
}

std::optional<std::size_t> position_in(const std::vector<lock_node>& queue, const lock_node& node) {
  if (queue.empty()) return std::nullopt;
  auto it = std::lower_bound(queue.begin(), queue.end(), node, queue_order{queue.front().sequence});
  if (it == queue.end() || it->name != node.name) return std::nullopt;
  return static_cast<std::size_t>(it - queue.begin());
}

const mutex_rule mutex_queue;
const read_write_rule read_write_queue;
const lease_rule lease_queue;
const exclusive_rule election_queue{node_kind::latch};
const no_queue_rule race_queue;

const queue_rule& queue_rule::of(queue_family family) noexcept {
  switch (family) {
    case queue_family::read_write: return read_write_queue;
    case queue_family::semaphore: return lease_queue;
    case queue_family::election: return election_queue;
    case queue_family::race: return race_queue;
    case queue_family::mutex: break;
  }
  return mutex_queue;
}

const queue_rule& queue_rule::of(node_kind kind) noexcept {
  static const queue_rule* const queues[] = {&mutex_queue, &read_write_queue, &lease_queue, &election_queue};
  for (const auto* rule : queues)
    if (rule->in_queue(kind)) return *rule;
  return mutex_queue;
}

bool queue_rule::blocks(node_kind, node_kind) const noexcept { return true; }

lock_verdict queue_rule::decide(const queue_view& queue, std::uint32_t index, std::string_view) const {
  if (index == 0) return {.what = lock_verdict::held};
  auto predecessor = index - 1;
  return {.what = lock_verdict::wait,
          .predecessor = queue.nodes[predecessor].name,
          .relist_after = queue.before[predecessor].others > 0};
}

lock_verdict decide(const queue_view& queue, const lock_node& mine, std::string_view exempt) {
  auto index = position_in(queue.nodes, mine);
  if (!index) return {};
  return queue_rule::of(mine.kind).decide(queue, static_cast<std::uint32_t>(*index), exempt);
}

queue_view make_view(std::vector<lock_node> queue, const std::function<bool(const lock_node&)>& known) {
  queue_view view{std::move(queue), {}};
  auto size = view.nodes.size();
  view.before.reserve(size);
  std::uint32_t others = 0, other_writers = 0, writer = queue_view::none;
  for (std::uint32_t i = 0; i < size; ++i) {
    const auto& node = view.nodes[i];
    view.before.push_back({others, other_writers, writer});
    bool is_writer = node.kind == node_kind::write;
    if (!known(node)) {
      ++others;
      other_writers += is_writer;
    }
    if (is_writer) writer = i;
  }
  return view;
}

after_release mutex_rule::next_after_release(const local_run_budget& budget, std::size_t max_run,
                                             std::chrono::milliseconds max_time, bool local_waiting, bool node_sure,
                                             std::chrono::steady_clock::time_point now) const {
  if (!local_waiting || !node_sure) return after_release::delete_node;
  if (!budget.other_seen) return after_release::hand_off;
  bool within = budget.handed_since < max_run && now - *budget.other_seen < max_time;
  return within ? after_release::hand_off : after_release::delete_node;
}

bool read_write_rule::in_queue(node_kind kind) const noexcept {
  return kind == node_kind::read || kind == node_kind::write;
}

bool read_write_rule::blocks(node_kind mine, node_kind other) const noexcept {
  return mine != node_kind::read || other == node_kind::write;
}

lock_verdict read_write_rule::decide(const queue_view& queue, std::uint32_t index, std::string_view exempt) const {
  const auto& nodes = queue.nodes;
  if (nodes[index].kind == node_kind::read) {
    // Only writers ahead block a reader (so readers never wait on later
    // writers, nor on one another; a downgrade's read node, the one node that
    // can appear ahead after a listing, never blocks a reader).
    auto writer = queue.before[index].writer;
    while (writer != queue_view::none && nodes[writer].name == exempt) writer = queue.before[writer].writer;
    if (writer == queue_view::none) return {.what = lock_verdict::held};
    return {.what = lock_verdict::wait,
            .predecessor = nodes[writer].name,
            .relist_after = queue.before[writer].other_writers > 0};
  }
  auto verdict = queue_rule::decide(queue, index, exempt);
  // Another process's writer ahead may downgrade: its read node would take
  // the writer's own sequence, after this listing (shared_mutex.hpp).
  if (verdict.what == lock_verdict::wait && nodes[index - 1].kind == node_kind::write &&
      queue.before[index].others > queue.before[index - 1].others)
    verdict.relist_after = true;
  return verdict;
}

room_verdict lease_rule::room_for(const std::vector<std::string>& children, const std::vector<std::string>& mine,
                                  std::size_t max) const {
  for (const auto& name : mine)
    if (std::find(children.begin(), children.end(), name) == children.end()) return room_verdict::missing;
  return children.size() <= max ? room_verdict::granted : room_verdict::wait;
}

const lock_node* find_by_uuid(const std::vector<lock_node>& queue, std::string_view uuid) {
  auto found = std::find_if(queue.begin(), queue.end(), [&](const lock_node& node) { return node.uuid() == uuid; });
  return found == queue.end() ? nullptr : &*found;
}

}  // namespace zkasio::detail
