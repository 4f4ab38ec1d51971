// The herd effect, measured: a holder and W waiters, each on its own session,
// on one lock: the fair mutex (each waiter watches its predecessor) or the
// race mutex (every waiter watches the one node). Each round, once every
// waiter's watch is in place (the server's wchp says so), the holder
// releases; then the server tells:
//   notifications_per_release  the watchers of the deleted node, each sent one
//                              notification (wchp just before the release)
//   requests_per_grant         requests the server received from that release
//                              until every watch was in place again (mntr's
//                              zk_packets_received; pings included)
// and the client: handoff (release stamped to the next grant) and, for the
// race mutex, how often the releaser won its own lock again.
#include <asio/connect.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <map>
#include <optional>
#include <ranges>
#include <sstream>
#include <stdexcept>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>

#include "harness.hpp"
#include "latency.hpp"

namespace zkasio::bench {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using namespace std::chrono_literals;

constexpr int warm_up_releases = 3;

// A four-letter word's answer from the first server of `hosts`.
awaitable<std::string> four_letter(std::string hosts, std::string word) {
  auto first = hosts.substr(0, hosts.find(','));
  auto colon = first.rfind(':');
  asio::ip::tcp::endpoint server(asio::ip::make_address(first.substr(0, colon)),
                                 static_cast<unsigned short>(std::stoi(first.substr(colon + 1))));
  asio::ip::tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(server, use_awaitable);
  co_await asio::async_write(socket, asio::buffer(word), use_awaitable);
  std::string answer;
  auto [ec, n] = co_await asio::async_read(socket, asio::dynamic_buffer(answer), as_tuple(use_awaitable));
  if (ec && ec != asio::error::eof) throw zkasio::system_error(ec, word);
  co_return answer;
}

// wchp: the sessions watching each path under `dir`.
awaitable<std::map<std::string, int>> watchers_under(const std::string& hosts, const std::string& dir) {
  std::istringstream lines(co_await four_letter(hosts, "wchp"));
  std::map<std::string, int> watchers;
  std::string line, path;
  while (std::getline(lines, line)) {
    if (line.starts_with("/")) path = line;
    else if (line.find("0x") != std::string::npos && path.starts_with(dir)) ++watchers[path];
  }
  co_return watchers;
}

awaitable<long long> packets_received(const std::string& hosts) {
  std::istringstream lines(co_await four_letter(hosts, "mntr"));
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("zk_packets_received\t")) co_return std::stoll(line.substr(line.find('\t') + 1));
  throw std::runtime_error("mntr has no zk_packets_received");
}

// A contender's lock: the fair mutex, or the race mutex (--recipe race).
class herd_lock {
 public:
  herd_lock(session& s, const std::string& path, bool race) {
    if (race) racing_.emplace(s, path);
    else fair_.emplace(s, path);
  }
  template <class Token>
  auto acquire(Token token) {
    return racing_ ? racing_->async_acquire(std::move(token)) : fair_->async_acquire(std::move(token));
  }

 private:
  std::optional<mutex> fair_;
  std::optional<race_mutex> racing_;
};

struct herd_state {
  int holder = -1;  // the contender holding, -1 while nobody does
  std::string held_node;
  clock::time_point granted;
  int grants = 0;
  bool stopping = false;
  asio::steady_timer* release_now = nullptr;  // cancelled: the holder releases
  std::vector<asio::cancellation_signal> stop;  // each contender's: ends its wait
};

// Acquires, holds until told to release (or to stop), releases, again.
awaitable<void> contender(herd_lock& l, herd_state& h, int me) {
  asio::steady_timer release_now(co_await asio::this_coro::executor);
  while (!h.stopping) {
    auto [ec, held] = co_await l.acquire(asio::bind_cancellation_slot(h.stop[me].slot(), as_tuple(use_awaitable)));
    if (ec == asio::error::operation_aborted || h.stopping) break;  // (a lock granted meanwhile is released)
    if (ec) throw zkasio::system_error(ec, "herd acquire");
    h.holder = me;
    h.held_node = held.node();
    h.granted = clock::now();
    ++h.grants;
    release_now.expires_at(clock::time_point::max());
    h.release_now = &release_now;
    co_await release_now.async_wait(as_tuple(use_awaitable));
    h.release_now = nullptr;
    h.holder = -1;
    co_await held.async_release(use_awaitable);
  }
}

// Waits until the grant after `grants` is in and `watches` watches are in
// place under `dir`.
awaitable<std::map<std::string, int>> settled(const options& o, herd_state& h, std::string dir, int watches,
                                              int grants) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  auto deadline = clock::now() + 30s;
  for (;;) {
    if (h.holder >= 0 && h.grants > grants) {
      auto watchers = co_await watchers_under(o.hosts, dir);
      int total = 0;
      for (auto& [path, n] : watchers) total += n;
      if (total == watches) co_return watchers;
    }
    if (clock::now() > deadline) throw std::runtime_error("the herd's watches never settled");
    tick.expires_after(2ms);
    co_await tick.async_wait(use_awaitable);
  }
}

awaitable<void> herd(session_list& sessions, const options& o, report& r) {
  for (auto& s : sessions) co_await s->async_connect(use_awaitable);
  bool race = o.recipe == "race";
  auto dir = bench_dir("herd"), path = dir + "/lock";
  std::vector<std::unique_ptr<herd_lock>> locks;
  for (auto& s : sessions) locks.push_back(std::make_unique<herd_lock>(*s, path, race));
  herd_state h;
  int waiters = static_cast<int>(sessions.size()) - 1;
  h.stop = std::vector<asio::cancellation_signal>(sessions.size());
  std::vector<awaitable<void>> players;
  for (int i = 0; i <= waiters; ++i) players.push_back(contender(*locks[i], h, i));
  // Every waiter watches (its predecessor, or the one node), and the holder's
  // lost signal watches its own node; a fair waiter watches its own node too
  // (all here wait behind another session's node: see fair_acquire.hpp).
  int watches = race ? waiters + 1 : 2 * waiters + 1;
  auto stop = [&] {
    h.stopping = true;
    for (auto& signal : h.stop) signal.emit(asio::cancellation_type::terminal);
    if (h.release_now) h.release_now->cancel();
  };
  auto measure = [&]() -> awaitable<void> {
    auto& handoff = entry(r, "handoff");
    double notifications = 0, requests = 0, regrants = 0;
    auto watchers = co_await settled(o, h, dir, watches, 0);
    for (int i = 0; i < warm_up_releases + o.rounds; ++i) {
      auto before = co_await packets_received(o.hosts);
      int released_by = h.holder, grants = h.grants;
      auto notified = watchers[h.held_node];
      auto released = clock::now();
      h.release_now->cancel();
      watchers = co_await settled(o, h, dir, watches, grants);
      if (h.grants != grants + 1) throw std::runtime_error("a release did not make exactly one grant");
      if (i < warm_up_releases) continue;
      handoff.add(h.granted - released);
      notifications += notified;
      requests += static_cast<double>(co_await packets_received(o.hosts) - before);
      regrants += h.holder == released_by;
    }
    add_value(r, "waiters", static_cast<double>(waiters));
    add_value(r, "notifications_per_release", notifications / o.rounds);
    add_value(r, "requests_per_grant", requests / o.rounds);
    add_value(r, "releaser_won_again", regrants / o.rounds);
  };
  // (A failed measurement stops the contenders too: run_all reports it.
  // A named lambda: its captures must outlive the coroutine.)
  auto measure_then_stop = [&]() -> awaitable<void> {
    std::exception_ptr failure;
    try {
      co_await measure();
    } catch (...) {
      failure = std::current_exception();
    }
    stop();
    if (failure) std::rethrow_exception(failure);
  };
  players.push_back(measure_then_stop());
  co_await run_all(std::move(players));
  // The cancelled waiters' nodes go in the background: closing their
  // sessions takes them at once; then the directories can go.
  session_list others;
  for (auto& s : sessions | std::views::drop(1)) others.push_back(std::move(s));
  co_await close_all(others);
  auto& first = *sessions.front();
  asio::steady_timer tick(co_await asio::this_coro::executor);
  for (auto deadline = clock::now() + 10s;;) {
    auto [ec, kids] = co_await first.async_get_children(path, as_tuple(use_awaitable));
    if (ec || kids.names.empty() || clock::now() > deadline) break;
    tick.expires_after(5ms);
    co_await tick.async_wait(use_awaitable);
  }
  co_await remove_dir(first, dir, std::vector<std::string>(1, path));
  co_await first.async_close(use_awaitable);
}

}  // namespace

report run_herd(const options& o) { return run_with_sessions(o, o.waiters + 1, "herd", herd); }

}  // namespace zkasio::bench
