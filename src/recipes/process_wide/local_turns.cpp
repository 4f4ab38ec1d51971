#include <asio/post.hpp>

#include "recipes/process_wide/local_turns.hpp"
#include "recipes/process_wide/per_path.hpp"

namespace zkasio::detail {

std::shared_ptr<local_turns> local_turns::of(const std::string& hosts, const std::string& path) {
  return one_per_path<local_turns>(hosts, path);
}

void local_turns::enter(line_key key, const asio::any_io_executor& executor, completion_ptr<> done) {
  {
    std::lock_guard lock(guard_);
    auto& l = lines_[key];
    if (l.ended) return fail({done, executor}, l.ended);
    if (l.taken) {
      l.waiting.push_back({done, executor});
      // (Runs on `executor` after the completion is marked done: a turn
      // handed to it concurrently is passed on by its post below.)
      done->on_cancel = [weak = weak_from_this(), key, raw = done.get()] {
        auto self = weak.lock();
        if (!self) return;
        std::lock_guard lock(self->guard_);
        if (auto it = self->lines_.find(key); it != self->lines_.end())
          std::erase_if(it->second.waiting, [raw](auto& w) { return w.done.get() == raw; });
      };
      return;
    }
    l.taken = true;
  }
  asio::post(executor, [self = shared_from_this(), key, done] {
    // Cancelled before it could take its turn: the turn passes on.
    if (done->done()) return self->leave(key);
    done->complete({});
  });
}

std::shared_ptr<local_turns::turn> local_turns::try_take(line_key key) {
  {
    std::lock_guard lock(guard_);
    auto& l = lines_[key];
    if (l.taken) return nullptr;
    l.taken = true;
  }
  return take(std::move(key));
}

void local_turns::session_ended(const line_key& key, error_code why) {
  std::lock_guard lock(guard_);
  auto it = lines_.find(key);
  if (it == lines_.end()) return;  // nobody in it: whoever enters later sees the generation is over
  it->second.ended = why;
  for (auto& w : std::exchange(it->second.waiting, {})) fail(std::move(w), why);
}

void local_turns::fail(waiter w, error_code ec) {
  asio::post(w.executor, [done = std::move(w.done), ec] {
    if (!done->done()) done->complete(ec);
  });
}

void local_turns::leave(line_key key) {
  std::lock_guard lock(guard_);
  if (auto it = lines_.find(key); it != lines_.end()) pass_on(it);
}

void local_turns::pass_on(line_map::iterator it) {
  auto& l = it->second;
  if (l.waiting.empty()) {
    lines_.erase(it);
    return;
  }
  auto next = std::move(l.waiting.front());
  l.waiting.pop_front();
  asio::post(next.executor, [self = shared_from_this(), key = it->first, done = std::move(next.done)] {
    if (done->done()) return self->leave(key);
    done->complete({});
  });
}

std::size_t local_turns::lines() const {
  std::lock_guard lock(guard_);
  return lines_.size();
}

}  // namespace zkasio::detail
