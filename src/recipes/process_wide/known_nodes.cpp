#include <utility>

#include "recipes/process_wide/known_nodes.hpp"
#include "recipes/process_wide/per_path.hpp"

namespace zkasio::detail {

bool session_ref::same_as(const session_ref& other) const {
  return generation == other.generation && !core.owner_before(other.core) && !other.core.owner_before(core);
}

bool session_ref::nodes_gone() const {
  // (A session object destroyed says nothing: closed while disconnected, its
  // nodes live until the server expires it.)
  auto c = core.lock();
  return c && (c->generation() != generation || c->state() == session_state::expired);
}

bool session_ref::ended() const {
  auto c = core.lock();
  if (!c || c->generation() != generation) return true;
  auto state = c->state();
  return state == session_state::expired || state == session_state::closed || state == session_state::auth_failed;
}

bool session_ref::connected() const {
  auto c = core.lock();
  return c && c->generation() == generation && c->state() == session_state::connected;
}

std::shared_ptr<known_nodes> known_nodes::of(const std::string& hosts, const std::string& path) {
  return one_per_path<known_nodes>(hosts, path);
}

void known_nodes::add(const lock_node& node, session_ref owner, std::string_view beside) {
  std::vector<local_waiter> woken;
  {
    std::lock_guard lock(guard_);
    // The same sequence under another name is of an earlier incarnation of
    // the parent (a container removed once empty): that node is gone. (But
    // for a downgrade's read node, beside its write node and maybe other
    // downgrades of it.)
    if (beside.empty())
      for (auto it = entries_.lower_bound(lookup_key{node.sequence, {}});
           it != entries_.end() && it->first.first == node.sequence;) {
        auto next = std::next(it);
        erase(it, woken);
        it = next;
      }
    entries_.emplace(key{node.sequence, node.name}, entry{node.kind, std::move(owner), {}});
  }
  wake(woken);
}

known_nodes::entries::iterator known_nodes::find(std::string_view name) {
  auto node = parse_lock_node_key(name);
  return node ? entries_.find(lookup_key{node->sequence, name}) : entries_.end();
}

void known_nodes::gone(std::string_view name) {
  std::vector<local_waiter> woken;
  {
    std::lock_guard lock(guard_);
    if (auto it = find(name); it != entries_.end()) erase(it, woken);
  }
  wake(woken);
}

void known_nodes::session_ended(const session_ref& owner, bool nodes_gone) {
  std::vector<local_waiter> woken;
  {
    std::lock_guard lock(guard_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (it->second.owner.same_as(owner)) {
        if (nodes_gone) {
          erase(it, woken);
        } else {
          for (auto& w : it->second.waiters) woken.push_back(std::move(w));
          it->second.waiters.clear();
        }
      }
      it = next;
    }
  }
  wake(woken);
}

queue_view known_nodes::view(std::vector<lock_node> queue) const {
  std::lock_guard lock(guard_);
  return make_view(std::move(queue), [this](const lock_node& node) {
    return entries_.find(lookup_key{node.sequence, node.name}) != entries_.end();
  });
}

known_nodes::below_result known_nodes::below(const lock_node& mine, std::string_view exempt) {
  std::vector<local_waiter> woken;
  below_result result;
  {
    std::lock_guard lock(guard_);
    // Down from mine, entry by entry, circularly (the counter may have
    // wrapped between two nodes), until an entry that is not before mine:
    // at most once round.
    const auto& rule = queue_rule::of(mine.kind);
    key cursor{mine.sequence, {}};
    for (auto steps = entries_.size(); steps > 0 && !entries_.empty(); --steps) {
      auto it = entries_.lower_bound(cursor);
      if (it == entries_.begin()) it = entries_.end();
      --it;
      if (!sequence_before(it->first.first, mine.sequence)) break;
      cursor = it->first;
      if (it->second.owner.nodes_gone()) {
        erase(it, woken);  // gone with its session
        continue;
      }
      // (Another recipe's node on the same path is no part of this queue.)
      if (!rule.in_queue(it->second.kind) || !rule.blocks(mine.kind, it->second.kind) || it->first.second == exempt)
        continue;
      result.what = it->second.owner.connected() ? below_result::node : below_result::relist;
      result.name = it->first.second;
      result.owner = it->second.owner;
      break;
    }
  }
  wake(woken);
  return result;
}

bool known_nodes::owned_by(std::string_view name, const session_ref& owner) const {
  auto node = parse_lock_node_key(name);
  if (!node) return false;
  std::lock_guard lock(guard_);
  auto it = entries_.find(lookup_key{node->sequence, name});
  return it != entries_.end() && it->second.owner.same_as(owner);
}

void known_nodes::wait_gone(std::string_view name, std::shared_ptr<gone_waiter> waiter, std::uint32_t token) {
  {
    std::lock_guard lock(guard_);
    auto it = find(name);
    // (A session that ended has no more waits to end: session_ended was said.)
    if (it != entries_.end() && !it->second.owner.ended()) {
      it->second.waiters.push_back({std::move(waiter), token});
      return;
    }
  }
  waiter->node_gone(token);
}

void known_nodes::forget_wait(std::string_view name, const gone_waiter* waiter) {
  std::lock_guard lock(guard_);
  if (auto it = find(name); it != entries_.end())
    std::erase_if(it->second.waiters, [waiter](const local_waiter& w) { return w.waiter.get() == waiter; });
}

std::size_t known_nodes::size() const {
  std::lock_guard lock(guard_);
  return entries_.size();
}

std::size_t known_nodes::waits() const {
  std::lock_guard lock(guard_);
  std::size_t count = 0;
  for (const auto& [key, e] : entries_) count += e.waiters.size();
  return count;
}

void known_nodes::erase(entries::iterator it, std::vector<local_waiter>& woken) {
  for (auto& w : it->second.waiters) woken.push_back(std::move(w));
  entries_.erase(it);
}

void known_nodes::wake(std::vector<local_waiter>& woken) {
  for (auto& w : woken) w.waiter->node_gone(w.token);
}

}  // namespace zkasio::detail
