// The handoff: two players ping-pong one lock (the mutex, a shared_mutex's
// write lock or a semaphore's one lease), each on its own session; a sample
// is the waiter's grant minus the holder's release. The players are two
// coroutines of this process, or with --processes 2 this process and a
// forked one (each with its own io_context and session), which share the
// game through an anonymous shared mapping: steady_clock is the system's
// monotonic clock, the same in both.
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <zkasio/mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

#include "harness.hpp"
#include "latency.hpp"

namespace zkasio::bench {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

// A handoff player's lock, by --recipe: the mutex, a shared_mutex's write
// lock, or a semaphore's one lease (its mutex taken first, as Curator's).
class recipe_lock {
 public:
  recipe_lock(session& s, const std::string& path, const std::string& recipe) {
    if (recipe == "rw") rw_.emplace(s, path);
    else if (recipe == "semaphore") leases_.emplace(s, path, 1);
    else plain_.emplace(s, path);
  }
  awaitable<lock> acquire() {
    if (rw_) co_return co_await rw_->async_acquire(use_awaitable);
    if (leases_) co_return co_await leases_->async_acquire(use_awaitable);
    co_return co_await plain_->async_acquire(use_awaitable);
  }
  // What the recipe leaves under `path` to remove, deepest first.
  static std::vector<std::string> nodes(const std::string& path, const std::string& recipe) {
    if (recipe == "semaphore") return {path + "/locks", path + "/leases", path};
    return {path};
  }

 private:
  std::optional<mutex> plain_;
  std::optional<shared_mutex> rw_;
  std::optional<semaphore> leases_;
};

// The game both players share, and its samples: in one anonymous shared
// mapping, which a forked player sees at the same address. Only the lock's
// holder touches it: the lock is what orders the players' writes (`holders`
// checks that it does).
struct ping_pong {
  int wanted = 0;
  std::atomic<int> holders{0};
  std::atomic<int> handoffs{0};
  std::atomic<int> count{0};                 // samples taken
  std::atomic<std::int64_t> released_ns{-1};  // the last release (steady_clock), -1: none yet
  std::atomic<int> released_by{-1};           // the player who made it
  std::int64_t* samples_ns = nullptr;         // `wanted` of them, after the game in the mapping

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
  }
};

class shared_game {
 public:
  explicit shared_game(int wanted)
      : bytes_(sizeof(ping_pong) + sizeof(std::int64_t) * static_cast<std::size_t>(wanted)),
        memory_(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) {
    if (memory_ == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    game_ = new (memory_) ping_pong;
    game_->wanted = wanted;
    game_->samples_ns = reinterpret_cast<std::int64_t*>(static_cast<char*>(memory_) + sizeof(ping_pong));
  }
  shared_game(const shared_game&) = delete;
  shared_game& operator=(const shared_game&) = delete;
  ~shared_game() {
    game_->~ping_pong();
    munmap(memory_, bytes_);
  }
  ping_pong& game() { return *game_; }
  // The samples taken, into `samples`.
  void collect(latency& samples) const {
    for (int i = 0; i < game_->count; ++i) samples.add(std::chrono::nanoseconds(game_->samples_ns[i]));
  }

 private:
  std::size_t bytes_;
  void* memory_;
  ping_pong* game_ = nullptr;
};

// Holds for 2 ms (the other is surely queued by then), stamps the release,
// releases and queues again; each grant after the other's release is one
// handoff sample (not a grant after its own: the other not there yet).
awaitable<void> player(recipe_lock& m, ping_pong& game, int me) {
  asio::steady_timer hold(co_await asio::this_coro::executor);
  while (game.count < game.wanted) {
    auto held = co_await m.acquire();
    auto acquired = ping_pong::now_ns();
    if (game.holders.fetch_add(1) != 0) throw std::runtime_error("both players held the lock at once");
    auto released = game.released_ns.load();
    if (released >= 0 && game.released_by != me && game.handoffs++ >= warm_up_rounds && game.count < game.wanted)
      game.samples_ns[game.count++] = acquired - released;
    hold.expires_after(2ms);
    co_await hold.async_wait(use_awaitable);
    game.holders.fetch_sub(1);
    game.released_ns = ping_pong::now_ns();
    game.released_by = me;
    co_await held.async_release(use_awaitable);
  }
}

// Player `me` on its own session, until the game is over.
awaitable<void> play(session& s, std::string path, const options& o, ping_pong& game, int me) {
  co_await s.async_connect(use_awaitable);
  recipe_lock m(s, path, o.recipe);
  co_await player(m, game, me);
}

awaitable<void> in_process(session_list& both, const options& o, ping_pong& game) {
  auto dir = bench_dir("handoff"), path = dir + "/lock";
  co_await (play(*both[0], path, o, game, 0) && play(*both[1], path, o, game, 1));
  co_await remove_dir(*both[0], dir, recipe_lock::nodes(path, o.recipe));
  co_await close_all(both);
}

// The other process's player: forked before this process has an io_context
// or a session (so it inherits neither); it ends with this process.
pid_t fork_player(const std::string& path, const options& o, ping_pong& game) {
  auto parent = getpid();
  pid_t child = fork();
  if (child < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (child > 0) return child;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) std::_Exit(1);
  run_with_sessions(o, 1, "handoff", [&](session_list& one, const options& o, report&) -> awaitable<void> {
    co_await play(*one[0], path, o, game, 1);
    co_await close_all(one);
  });
  std::_Exit(0);
}

// Until the forked player has exited, after the game and well; else fails
// at once, saying why in `why`: its node would otherwise keep this player
// waiting until its session expired, or this one would play alone for ever.
// Polled, so that the io thread never blocks on it.
awaitable<void> watch_player(pid_t child, const ping_pong& game, std::string& why) {
  asio::steady_timer poll(co_await asio::this_coro::executor);
  for (;;) {
    int status = 0;
    auto exited = waitpid(child, &status, WNOHANG);
    if (exited < 0 && errno != EINTR) why = "waitpid: " + std::generic_category().message(errno);
    if (exited == child && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) why = "the other process's player failed";
    else if (exited == child && game.count < game.wanted) why = "the other process's player ended before the game";
    if (!why.empty()) throw std::runtime_error(why);
    if (exited == child) co_return;
    poll.expires_after(10ms);
    co_await poll.async_wait(use_awaitable);
  }
}

}  // namespace

report run_handoff(const options& o) {
  shared_game shared(o.rounds);
  auto& game = shared.game();
  report r;
  if (o.processes == 1) {
    r = run_with_sessions(o, 2, "handoff", [&](session_list& both, const options& o, report&) {
      return in_process(both, o, game);
    });
  } else {
    auto dir = bench_dir("handoff"), path = dir + "/lock";
    auto child = fork_player(path, o, game);
    r = run_with_sessions(o, 1, "handoff", [&](session_list& one, const options& o, report&) -> awaitable<void> {
      // (The other's last release is done once it has ended.)
      std::string why;
      try {
        co_await (play(*one[0], path, o, game, 0) && watch_player(child, game, why));
      } catch (...) {  // (the watch's failure cancels the play: both throw)
        if (why.empty()) throw;
        throw std::runtime_error(why);
      }
      co_await remove_dir(*one[0], dir, recipe_lock::nodes(path, o.recipe));
      co_await close_all(one);
    });
  }
  shared.collect(entry(r, "handoff"));
  add_value(r, "processes", static_cast<double>(o.processes));
  return r;
}

}  // namespace zkasio::bench
