#include "chaos/worker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/signal_set.hpp>
#include <asio/strand.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <type_traits>
#include <variant>
#include <zkasio/election.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

namespace zkasio::chaos {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::as_tuple;
using std::chrono::steady_clock;

std::string lock_path(const std::string& root, int lock) { return root + "/lock-" + std::to_string(lock); }

std::string format(const std::vector<lock_plan>& plans) {
  std::string text;
  for (auto& p : plans) {
    text += (text.empty() ? "" : ",") + std::string(name(p.kind));
    if (p.kind == recipe::semaphore) text += ":" + std::to_string(p.capacity);
  }
  return text;
}

std::vector<lock_plan> parse_plans(std::string_view text) {
  std::vector<lock_plan> plans;
  while (!text.empty()) {
    auto item = text.substr(0, text.find(','));
    text.remove_prefix(std::min(text.size(), item.size() + 1));
    auto colon = item.find(':');
    auto kind = recipe_named(item.substr(0, colon));
    if (!kind) throw std::invalid_argument("no recipe is called '" + std::string(item.substr(0, colon)) + "'");
    lock_plan p{*kind};
    if (colon != std::string_view::npos) p.capacity = std::stoi(std::string(item.substr(colon + 1)));
    if (p.capacity < 1 || (p.kind != recipe::semaphore && p.capacity != 1))
      throw std::invalid_argument("'" + std::string(item) + "': only a semaphore has N, at least 1");
    plans.push_back(p);
  }
  return plans;
}

std::vector<std::string> worker_arguments(const worker_options& o) {
  return {std::to_string(o.index),
          o.hosts,
          o.root,
          std::to_string(o.locks),
          format(o.plans),
          std::to_string(o.coroutines),
          std::to_string(o.stop_at),
          o.log,
          std::to_string(o.seed),
          std::to_string(o.session_timeout.count()),
          std::to_string(o.safety_margin.count()),
          std::to_string(o.longest_wait.count())};
}

worker_options parse_worker_arguments(const std::vector<std::string>& args) {
  if (args.size() != 12) throw std::invalid_argument("a worker takes 12 arguments, not " + std::to_string(args.size()));
  worker_options o;
  o.index = std::stoi(args[0]);
  o.hosts = args[1];
  o.root = args[2];
  o.locks = std::stoi(args[3]);
  o.plans = parse_plans(args[4]);
  o.coroutines = std::stoi(args[5]);
  o.stop_at = std::stoll(args[6]);
  o.log = args[7];
  o.seed = static_cast<unsigned>(std::stoul(args[8]));
  o.session_timeout = std::chrono::milliseconds(std::stoll(args[9]));
  o.safety_margin = std::chrono::milliseconds(std::stoll(args[10]));
  o.longest_wait = std::chrono::milliseconds(std::stoll(args[11]));
  if (static_cast<int>(o.plans.size()) != o.locks) throw std::invalid_argument("a worker needs a recipe for each lock");
  return o;
}

namespace {

// The ephemeral nodes at and below `path` (of `owner` only, if given); -1 if it cannot tell.
awaitable<int> ephemeral_nodes(session& s, std::string path, std::optional<std::int64_t> owner) {
  auto [ec, st] = co_await s.async_exists(path, as_tuple(use_awaitable));
  if (ec) co_return -1;
  if (!st) co_return 0;
  if (st->ephemeral_owner != 0) co_return !owner || st->ephemeral_owner == *owner ? 1 : 0;  // (it has no children)
  auto [list_ec, kids] = co_await s.async_get_children(path, as_tuple(use_awaitable));
  if (list_ec == zk_error::no_node) co_return 0;
  if (list_ec) co_return -1;
  int count = 0;
  for (auto& kid : kids.names) {
    int n = co_await ephemeral_nodes(s, path + "/" + kid, owner);
    if (n < 0) co_return -1;
    count += n;
  }
  co_return count;
}

}  // namespace

awaitable<int> nodes_left(session& s, std::string root, int locks, std::optional<std::int64_t> owner) {
  asio::steady_timer retry(co_await asio::this_coro::executor);
  auto until = steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    int left = 0;
    for (int i = 0; i <= locks && left >= 0; ++i) {
      int n = co_await ephemeral_nodes(s, lock_path(root, i), owner);
      left = n < 0 ? -1 : left + n;
    }
    if (left == 0 || steady_clock::now() > until) co_return left;
    retry.expires_after(std::chrono::milliseconds(100));
    co_await retry.async_wait(use_awaitable);
  }
}

namespace {

// The longest hold of the long-hold lock.
constexpr std::chrono::milliseconds longest_hold{12000};
// A cancelled acquire is cancelled this long after its start at most: before
// its create's reply, while it waits, or as it is granted.
constexpr std::chrono::milliseconds latest_cancel{100};

ns since_epoch(steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
ns now() { return since_epoch(steady_clock::now()); }

// The log: one write(2) per line, appended, so that a crash loses nothing written.
class record_file {
 public:
  explicit record_file(const std::string& path) : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
  }
  ~record_file() { ::close(fd_); }
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;
  void write(std::string line) {
    line += '\n';
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("cannot write the log");
  }

 private:
  int fd_;
};

// What one acquire asks for.
struct request {
  std::optional<steady_clock::time_point> deadline;  // none: waits as long as it takes
  bool try_once = false;
  bool reader = false;       // shared_mutex: the read lock
  std::size_t leases = 1;    // semaphore
  std::optional<owner> who;  // shared_mutex: an owner, so that its writer may downgrade
};

// What an acquire got: one lock, or a semaphore's leases.
using acquired = std::tuple<zkasio::error_code, std::vector<lock>>;
using acquire_token = decltype(asio::bind_cancellation_slot(asio::cancellation_slot(), as_tuple(use_awaitable)));

template <class Held>
awaitable<acquired> as_holds(awaitable<std::tuple<zkasio::error_code, Held>> acquire) {
  auto [ec, held] = co_await std::move(acquire);
  std::vector<lock> holds;
  if (!ec) holds.push_back(std::move(held));
  co_return acquired{ec, std::move(holds)};
}

// Each recipe's acquire of `r` (a request the recipe has: no try for an election).
template <class Exclusive>  // mutex, race_mutex, shared_mutex's write lock
awaitable<acquired> acquire(Exclusive& m, const request& r, acquire_token token) {
  if (r.try_once) return as_holds(m.async_try_acquire(token));
  return as_holds(m.async_acquire({.who = r.who, .deadline = r.deadline}, token));
}

awaitable<acquired> acquire(shared_mutex& m, const request& r, acquire_token token) {
  if (r.reader) {
    if (r.try_once) return as_holds(m.async_try_acquire_shared(token));
    return as_holds(m.async_acquire_shared({.who = r.who, .deadline = r.deadline}, token));
  }
  return acquire<shared_mutex>(m, r, token);
}

awaitable<acquired> acquire(semaphore& m, const request& r, acquire_token token) {
  if (r.try_once) return as_holds(m.async_try_acquire(token));  // one lease: the semaphore's only try
  if (!r.deadline) return m.async_acquire_many(r.leases, token);
  return m.async_acquire_many_until(r.leases, *r.deadline, token);
}

// (The campaign's node says when it began, after the object's data: a
// wedge's dump then names the acquire of each node.)
awaitable<acquired> campaign(election& e, const std::string& data, const request& r, acquire_token token) {
  auto tagged = data + " " + std::to_string(now());
  if (!r.deadline) return as_holds(e.async_campaign(tagged, token));
  return as_holds(e.async_campaign_until(tagged, *r.deadline, token));
}

// One lock object of the worker, of its lock's recipe.
class lock_object {
 public:
  lock_object(session& s, const std::string& path, lock_plan plan, lock_options options)
      : plan_(plan), data_(options.data) {
    switch (plan.kind) {
      case recipe::mutex:
        object_ = std::make_unique<mutex>(s, path, std::move(options));
        break;
      case recipe::handoff_mutex: {
        mutex_options handing = options;
        handing.local_handoff = local_handoff_bound{};
        object_ = std::make_unique<mutex>(s, path, std::move(handing));
        break;
      }
      case recipe::race_mutex:
        object_ = std::make_unique<race_mutex>(s, path, std::move(options));
        break;
      case recipe::election_fair:
      case recipe::election_race:
        object_ = std::make_unique<election>(
            s, path, plan.kind == recipe::election_fair ? election_mode::fair : election_mode::race,
            std::move(options));
        break;
      case recipe::shared_mutex:
        object_ = std::make_unique<shared_mutex>(s, path, std::move(options));
        break;
      case recipe::semaphore:
        object_ = std::make_unique<semaphore>(s, path, static_cast<std::size_t>(plan.capacity), std::move(options));
        break;
    }
  }

  const lock_plan& plan() const { return plan_; }
  // The lock object's strand.
  asio::any_io_executor get_executor() const {
    return std::visit([](auto& object) { return object->get_executor(); }, object_);
  }

  // Acquires, cancelled (terminal) when `cancel` is emitted.
  awaitable<acquired> acquire(const request& r, asio::cancellation_slot cancel) {
    auto token = asio::bind_cancellation_slot(cancel, as_tuple(use_awaitable));
    return std::visit(
        [&](auto& object) {
          if constexpr (std::is_same_v<std::decay_t<decltype(*object)>, election>)
            return campaign(*object, data_, r, token);
          else
            return chaos::acquire(*object, r, token);
        },
        object_);
  }

 private:
  lock_plan plan_;
  std::string data_;  // an election's campaign data
  std::variant<std::unique_ptr<mutex>, std::unique_ptr<race_mutex>, std::unique_ptr<election>,
               std::unique_ptr<shared_mutex>, std::unique_ptr<semaphore>>
      object_;
};

bool any_lost(const std::vector<lock>& held) {
  return std::any_of(held.begin(), held.end(), [](const lock& l) { return l.lost(); });
}

// Waits `length`, or until one of `held` may be lost.
awaitable<void> hold_for(std::vector<lock>& held, std::chrono::nanoseconds length) {
  auto executor = co_await asio::this_coro::executor;
  // Shared with the lost waits, which complete (not_held) only at the release.
  auto ended = std::make_shared<asio::steady_timer>(executor, length);
  for (auto& l : held)
    l.async_wait_lost(asio::bind_executor(executor, [ended](zkasio::error_code ec) {
      if (!ec) ended->cancel();
    }));
  co_await ended->async_wait(as_tuple(use_awaitable));
}

awaitable<void> release(std::vector<lock>& held) {
  for (auto& l : held) co_await l.async_release(as_tuple(use_awaitable));
}

struct worker {
  const worker_options& o;
  session& s;
  // By lock: the object of most acquires, and (but for the long-hold lock)
  // the object of the acquires without a deadline, with requeue_on_expiry.
  std::vector<std::unique_ptr<lock_object>> plain, requeue;
  record_file log;
  std::map<int, acquire_record> in_flight;  // by coroutine: the acquire it waits for

  // Acquires `r` of `object` (lock `which`) for coroutine `id`, cancelled at
  // `cancel_at` if given, and logs the acquire.
  awaitable<acquired> acquire(int id, int which, lock_object& object, const request& r,
                              std::optional<steady_clock::time_point> cancel_at = std::nullopt) {
    auto due = r.deadline;
    if (cancel_at) due = std::min(*cancel_at, due.value_or(*cancel_at));
    // "pending": as the watchdog logs it if it never ends.
    acquire_record a{o.index, which, now(), std::nullopt, due ? since_epoch(*due) : -1, "pending"};
    in_flight[id] = a;
    // Shared with the timer's handler, which may run after the acquire ended.
    auto cancel = std::make_shared<asio::cancellation_signal>();
    asio::steady_timer cancel_timer(co_await asio::this_coro::executor);
    if (cancel_at) {
      cancel_timer.expires_at(*cancel_at);
      cancel_timer.async_wait([cancel](zkasio::error_code ec) {
        if (!ec) cancel->emit(asio::cancellation_type::terminal);
      });
    }
    auto result = co_await object.acquire(r, cancel->slot());
    cancel_timer.cancel();
    cancel->slot().clear();  // a late timer's emit then reaches nothing
    in_flight.erase(id);
    a.end = now();
    auto& ec = std::get<0>(result);
    a.result = ec ? ec.message() : "ok";
    std::replace(a.result.begin(), a.result.end(), ' ', '_');
    log.write(format(a));
    co_return result;
  }

  // `asked`: when its acquire was asked for (see hold_record::asked).
  hold_record hold_of(int which, const std::vector<lock>& held, bool reader, ns asked) const {
    auto& plan = plain[which]->plan();
    auto fence = held.front().fencing_token();
    return {o.index,       which,       now(), 0,     fence.czxid, false, plan.kind, reader, static_cast<int>(held.size()),
            plan.capacity, fence.local, false, asked};
  }
  void end(hold_record& h, const std::vector<lock>& held) {
    h.end = now();
    h.lost = any_lost(held);
    log.write(format(h));
  }

  awaitable<void> contend(int id) {
    std::mt19937 random(o.seed * 1000 + static_cast<unsigned>(id));
    auto wait_ms = std::uniform_int_distribution<long>(500, o.longest_wait.count());
    while (now() < o.stop_at) {
      // Coroutine 0 takes the long-hold lock (the last one) only, with a deadline.
      int which = id == 0 ? o.locks : static_cast<int>(random() % static_cast<unsigned>(o.locks));
      auto& plan = plain[which]->plan();
      auto kind = random() % 10;
      bool waits = id != 0 && kind == 1;  // no deadline
      request r{
          .deadline = steady_clock::now() + std::chrono::milliseconds(wait_ms(random)),
          .try_once = id != 0 && kind == 0 && plan.kind != recipe::election_fair && plan.kind != recipe::election_race,
          .reader = plan.kind == recipe::shared_mutex && random() % 5 < 3};
      if (r.try_once || waits) r.deadline.reset();
      if (plan.kind == recipe::semaphore && !r.try_once) r.leases = 1 + random() % static_cast<unsigned>(plan.capacity);
      if (plan.kind == recipe::shared_mutex && waits && !r.reader) r.who = owner();  // a writer that may downgrade
      std::optional<steady_clock::time_point> cancel_at;
      if (id != 0 && kind == 2)
        cancel_at = steady_clock::now() + std::chrono::microseconds(random() % (latest_cancel.count() * 1000 + 1));
      auto& object = waits ? *requeue[which] : *plain[which];
      auto asked = now();
      auto [ec, held] = co_await acquire(id, which, object, r, cancel_at);
      if (ec) continue;
      auto length =
          id == 0 ? std::chrono::nanoseconds(std::chrono::milliseconds(1000 + random() % (longest_hold.count() - 999)))
                  : std::chrono::nanoseconds(std::chrono::microseconds(random() % 5001));
      auto h = hold_of(which, held, r.reader, asked);
      co_await hold_for(held, length);
      end(h, held);
      if (!r.reader && r.who && !h.lost && random() % 2 == 0) {
        // A downgrade: the read lock taken while the write lock is held,
        // then the write lock released. The write hold ended before the
        // read lock was asked for and the read hold begins once granted:
        // nothing is done in between, and each interval is of one mode.
        asked = now();
        auto [read_ec, reading] = co_await acquire(id, which, object, {.reader = true, .who = r.who});
        co_await release(held);
        if (read_ec) continue;
        held = std::move(reading);
        h = hold_of(which, held, true, asked);
        co_await hold_for(held, length);
        end(h, held);
      }
      co_await release(held);
    }
  }

  // After the faults stopped, each lock object once more: a free lock must
  // be granted. The last grants of the loops end by then, and a session lost
  // to the faults has expired.
  awaitable<void> final_try_of(int which, lock_object& object, steady_clock::time_point deadline) {
    auto [ec, held] = co_await acquire(0, which, object, {.deadline = deadline});  // (as coroutine 0: all have ended)
    log.write(format(final_try{o.index, which, !ec}));
    co_await release(held);
  }
};

}  // namespace

// The busy_strand fault (SIGUSR1 from the driver): the strand of one of the
// worker's lock objects kept busy for 0.1-3 s by a handler that blocks its
// thread, while the worker's other thread goes on (its session's strand
// reads the replies, whose completions wait on the busy strand). The window
// is logged, for the verdict (a busy line: what it stopped could not be
// told of a loss, as in a paused process).
void keep_strands_busy(asio::signal_set& signals, worker& w, const asio::any_io_executor& strand, std::mt19937& random) {
  signals.async_wait(asio::bind_executor(strand, [&signals, &w, strand, &random](zkasio::error_code ec, int) {
    if (ec) return;
    auto which = static_cast<int>(random() % w.plain.size());
    auto length = std::chrono::milliseconds(100 + random() % 2901);
    asio::post(w.plain[static_cast<std::size_t>(which)]->get_executor(), [&w, strand, which, length] {
      pause_window busy{w.o.index, now(), 0, which};
      std::this_thread::sleep_for(length);  // the fault itself: this strand's thread does nothing else
      busy.to = now();
      asio::post(strand, [&w, busy] { w.log.write(format(busy)); });
    });
    keep_strands_busy(signals, w, strand, random);
  }));
}

// Each session of the worker as it connects, on stderr: the sessions a
// wedge's dump (the driver's, of the queues' ephemeral owners) names.
awaitable<void> tell_sessions(session& s, int index) {
  auto state = session_state::connecting;
  for (;;) {
    auto [ec, next] = co_await s.async_wait_state_change(state, as_tuple(use_awaitable));
    if (ec) co_return;
    state = next;
    if (state == session_state::connected)
      std::cerr << "chaos worker " << index << ": session 0x" << std::hex << s.id() << std::dec << " (generation "
                << s.generation() << ") connected at " << now() << '\n';
    if (state == session_state::closed) co_return;
  }
}

int run_worker(const worker_options& o) {
  // Two threads: one may be held by a busy strand (keep_strands_busy) while
  // the other runs the session. The worker's own coroutines, its log and its
  // records are on one strand of them.
  asio::io_context io(2);
  auto strand = asio::make_strand(io);
  // The servers' tick (the chaos ensemble's, tests/support/zk_servers.hpp):
  // the tightest last_contact the library may compute.
  session s(io, session_options{.hosts = o.hosts, .session_timeout = o.session_timeout,
                                .server_tick_time = std::chrono::milliseconds(200)});
  worker w{o, s, {}, {}, record_file(o.log), {}};
  for (int i = 0; i <= o.locks; ++i) {
    auto plan = i == o.locks ? lock_plan{} : o.plans[i];
    // (The data names the object too, for a wedge's dump; the fault driver
    // reads the worker's index from its start: holder_of.)
    auto data = "worker-" + std::to_string(o.index);
    lock_options options{.safety_margin = o.safety_margin, .data = data + " plain"};
    w.plain.push_back(std::make_unique<lock_object>(s, lock_path(o.root, i), plan, options));
    options.requeue_on_expiry = true;
    options.data = data + " requeue";
    if (i < o.locks) w.requeue.push_back(std::make_unique<lock_object>(s, lock_path(o.root, i), plan, options));
  }
  // An acquire that hangs must not hang the worker: past the last deadline
  // (and a pause's worth), what is still in flight is written down.
  auto stop_at = steady_clock::time_point(std::chrono::nanoseconds(o.stop_at));
  auto final_deadline = stop_at + o.longest_wait + longest_hold + 2 * o.session_timeout + std::chrono::seconds(5);
  asio::steady_timer watchdog(strand, final_deadline + std::chrono::seconds(10));
  asio::signal_set busy_signals(strand, SIGUSR1);
  std::mt19937 busy_random(o.seed * 7919u);
  keep_strands_busy(busy_signals, w, strand, busy_random);
  int status = 0;
  watchdog.async_wait([&](zkasio::error_code ec) {
    if (ec) return;
    std::cerr << "chaos worker " << o.index << " (session 0x" << std::hex << s.id() << std::dec << "): "
              << w.in_flight.size() << " acquires never completed:\n";
    for (auto& [id, a] : w.in_flight) {
      w.log.write(format(a));
      std::cerr << "  coroutine " << id << ": " << format(a) << '\n';  // its lock, its deadline (-1: none)
    }
    std::_Exit(3);
  });
  asio::co_spawn(strand, tell_sessions(s, o.index), asio::detached);
  asio::co_spawn(
      strand,
      [&]() -> awaitable<void> {
        auto executor = co_await asio::this_coro::executor;
        asio::steady_timer all_done(executor, asio::steady_timer::time_point::max());
        int remaining = o.coroutines;
        for (int id = 0; id < o.coroutines; ++id)
          asio::co_spawn(executor, w.contend(id), [&](std::exception_ptr e) {
            if (e) {
              try {
                std::rethrow_exception(e);
              } catch (const std::exception& x) {
                std::cerr << "chaos worker " << o.index << ": " << x.what() << '\n';
              }
              status = 1;
            }
            if (--remaining == 0) all_done.cancel();
          });
        co_await all_done.async_wait(as_tuple(use_awaitable));
        for (int i = 0; i <= o.locks; ++i) {
          co_await w.final_try_of(i, *w.plain[i], final_deadline);
          if (i < o.locks) co_await w.final_try_of(i, *w.requeue[i], final_deadline);
        }
        w.log.write("orphans " + std::to_string(o.index) + " " +
                    std::to_string(co_await nodes_left(s, o.root, o.locks, s.id())));
        watchdog.cancel();
        busy_signals.cancel();
        co_await s.async_close(as_tuple(use_awaitable));
      },
      [&](std::exception_ptr e) {
        if (e) status = 1;
        watchdog.cancel();
        busy_signals.cancel();
      });
  std::thread second([&io] { io.run(); });
  io.run();
  second.join();
  return status;
}

}  // namespace zkasio::chaos
