// local_turns: the race recipes' contenders of one ZooKeeper session on one
// path take turns in this process.
//
// Why: the race recipes' node (race_mutex, election's race mode) is one
// plain EPHEMERAL node at the path, and its ephemeral owner is a session,
// not a contender. When a create's reply is lost, finding the node owned by
// the session tells the contender that the node is its own only if no other
// contender of that session could have made it: so a session has one
// contender at a time at the server per path, from its create to the end of
// its hold or cleanup, and its other contenders wait here, in order (which
// also keeps a session's server watches on the node at one).
//
// Scope and lifetime: one object per (connect string, path) in the process,
// shared by every race engine on the path (a process-wide table of weak
// references, per_path.hpp); one line per (session, generation) in it, which
// exists while someone is in it. A new generation (the session expired: its
// nodes went with it) is a new line. When a session ends (expires or is
// closed) its line ends (session_ended): those waiting in it, and those who
// come later, fail at once, though the turn may still be held (a lost hold
// keeps it until released). Lines are keyed by the session core's
// control block (a weak reference), so a later session never takes an
// earlier one's line.
//
// Thread-safe: engines on other strands and threads share it (one std::mutex).
#pragma once

#include <asio/any_io_executor.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <zkasio/detail/completion.hpp>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

class local_turns : public std::enable_shared_from_this<local_turns> {
 public:
  // The session (its core, weakly) and its generation.
  using line_key = std::pair<std::weak_ptr<const void>, std::uint64_t>;

  // The object for `path` on the ensemble `hosts`.
  static std::shared_ptr<local_turns> of(const std::string& hosts, const std::string& path);

  // Whose turn it is, until destroyed: then the next in its line goes.
  class turn {
   public:
    turn(std::shared_ptr<local_turns> table, line_key key) : table_(std::move(table)), key_(key) {}
    turn(const turn&) = delete;
    turn& operator=(const turn&) = delete;
    ~turn() { table_->leave(key_); }

   private:
    std::shared_ptr<local_turns> table_;
    line_key key_;
  };

  // Completes `done` on `executor` when the caller's turn in `key`'s line has
  // come (at once when nobody is in it): the caller then owns the turn and
  // must take it (take()) before anything else can fail. Cancelling `done`
  // on `executor` leaves the line (a turn granted meanwhile passes on).
  void enter(line_key key, const asio::any_io_executor& executor, completion_ptr<> done);
  // The turn the caller was granted by enter().
  std::shared_ptr<turn> take(line_key key) { return std::make_shared<turn>(shared_from_this(), key); }
  // The turn at once if nobody is in `key`'s line, else null.
  std::shared_ptr<turn> try_take(line_key key);

  // `key`'s session ended (said by every engine on it, see
  // report_session_end in engine.cpp): its waiters, and whoever enters
  // after, complete with `why`.
  void session_ended(const line_key& key, error_code why);

  // Lines, for tests.
  std::size_t lines() const;

 private:
  struct waiter {
    completion_ptr<> done;
    asio::any_io_executor executor;
  };
  struct line {
    bool taken = false;  // someone's turn
    std::deque<waiter> waiting;
    error_code ended;  // the session's end, once said
  };
  struct key_less {
    bool operator()(const line_key& a, const line_key& b) const {
      if (a.second != b.second) return a.second < b.second;
      return a.first.owner_before(b.first);
    }
  };
  using line_map = std::map<line_key, line, key_less>;

  void leave(line_key key);
  // Completes `w` with `ec` on its executor, unless cancelled meanwhile.
  static void fail(waiter w, error_code ec);
  // With guard_ held: passes `key`'s turn to its next waiter, or ends the line.
  void pass_on(line_map::iterator it);

  mutable std::mutex guard_;
  line_map lines_;
};

}  // namespace zkasio::detail
