// zkasio-chaos: the chaos suite. Worker processes contend for a few locks on a
// 3-server ensemble while a fault driver pauses and kills servers (the leader
// too), expires, cuts off and pauses workers; then the verdict: figures, and
// the numbers that must be zero (two holders at once, fencing tokens out of
// order, acquires that outlived their deadline, nodes left, crashes).
//
//   zkasio-chaos [--seconds N] [--seed S] [--workers N] [--coroutines N] [--locks N]
//                [--recipes LIST] [--curator N] [--json FILE]
//
// Each lock's recipe is drawn from the seed (a semaphore's N too, 2-4), all
// different while there are recipes left; --recipes mutex,semaphore,...
// names them instead, the list repeated over the locks. The long-hold lock
// stays a mutex: the fault driver finds its holder in the mutex's queue
// (holder_of), to fault it mid-hold; the lost signal that must end such a
// hold is every recipe's, the same zkasio::lock.
//
// Beside zkasio's workers, `--curator N` Curator workers (CuratorWorker.java,
// 8 threads each; 1 by default, 0 for none) contend on the same lock paths
// under the same faults; what involves them is counted apart (verdict.hpp's
// beside_curator), not among the figures that must be zero.
//
// Exits 0 when every must-be-zero figure is 0 (and, in a run of 60 s or
// more, every kind of fault was injected). A run in which the ensemble lost
// committed transactions (ZooKeeper 3.8.0's own bugs: logged_deletes.hpp)
// is void, and another is made with the next seed, three runs at most.
// `zkasio-chaos worker ...` is a worker (started by the driver).
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/this_coro.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <zkasio/mutex.hpp>
#include <zkasio/session.hpp>

#include "chaos/faults.hpp"
#include "chaos/logged_deletes.hpp"
#include "chaos/verdict.hpp"
#include "chaos/worker.hpp"
#include "support/java_program.hpp"
#include "support/process.hpp"

using namespace zkasio;
using namespace zkasio::chaos;
using namespace std::chrono_literals;

namespace {

struct driver_options {
  int seconds = 60;
  unsigned seed = std::random_device{}();
  int workers = 4;
  int coroutines = 25;
  int locks = 3;
  std::vector<recipe> recipes;  // forced, else drawn from the seed
  int curator = 1;
  std::string json;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "zkasio-chaos: " << problem
            << "\nusage: zkasio-chaos [--seconds N] [--seed S] [--workers N] [--coroutines N] [--locks N]"
               " [--recipes LIST] [--curator N] [--json FILE]\n";
  std::exit(2);
}

std::vector<recipe> parse_recipes(const std::string& list) {
  std::vector<recipe> recipes;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    auto kind = recipe_named(item);
    if (!kind) usage("no recipe is called '" + item + "'");
    recipes.push_back(*kind);
  }
  if (recipes.empty()) usage("--recipes names none");
  return recipes;
}

// Each lock's recipe, and a semaphore's N (2-4), from the seed: the recipes
// in an order drawn from it, so that a run covers `locks` of them and seeds
// cover all; or --recipes' list, repeated.
std::vector<lock_plan> plan_locks(const driver_options& o) {
  std::seed_seq seeds{o.seed, 26u};  // not the fault driver's sequence
  std::mt19937 random(seeds);
  std::vector<recipe> order(std::begin(all_recipes), std::end(all_recipes));
  std::shuffle(order.begin(), order.end(), random);
  auto& from = o.recipes.empty() ? order : o.recipes;
  std::vector<lock_plan> plans;
  for (std::size_t i = 0; i < static_cast<std::size_t>(o.locks); ++i) {
    auto kind = from[i % from.size()];
    plans.push_back({kind, kind == recipe::semaphore ? 2 + static_cast<int>(random() % 3) : 1});
  }
  return plans;
}

driver_options parse(int argc, char** argv) {
  driver_options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) usage("'" + flag + "' needs a value");
    std::string value = argv[++i];
    try {
      if (flag == "--seconds") o.seconds = std::stoi(value);
      else if (flag == "--seed") o.seed = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--workers") o.workers = std::stoi(value);
      else if (flag == "--coroutines") o.coroutines = std::stoi(value);
      else if (flag == "--locks") o.locks = std::stoi(value);
      else if (flag == "--curator") o.curator = std::stoi(value);
      else if (flag == "--json") o.json = value;
      else if (flag == "--recipes") o.recipes = parse_recipes(value);
      else usage("unknown option '" + flag + "'");
    } catch (const std::logic_error&) {
      usage("'" + value + "' is not a number for " + flag);
    }
  }
  if (o.seconds < 1 || o.workers < 1 || o.coroutines < 1 || o.locks < 1) usage("every count must be at least 1");
  if (o.curator < 0) usage("--curator must not be negative");
  return o;
}

// Runs `read` on a session of its own to `hosts` (a reader beside the
// workers), then closes it; `bound` at most.
void with_own_session(const std::string& hosts, std::chrono::seconds bound,
                      const std::function<asio::awaitable<void>(session&)>& read) {
  asio::io_context io;
  session s(io, session_options{.hosts = hosts, .session_timeout = 10s});
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await read(s);
        co_await s.async_close(asio::experimental::as_tuple(asio::use_awaitable));
      },
      [](std::exception_ptr) {});
  io.run_for(bound);
}

// The nodes of any session left at and under the lock paths once every
// worker has ended (their sessions closed; at most 20 s for the server to
// catch up); -1 if it cannot tell.
int all_nodes_left(const std::string& hosts, const std::string& root, int locks) {
  int left = -1;
  with_own_session(hosts, 60s, [&](session& s) -> asio::awaitable<void> {
    left = co_await nodes_left(s, root, locks, std::nullopt);
  });
  return left;
}

// The worker that holds `path` now (its node's data begins "worker-N"), if
// any, and its session (the node's ephemeral owner; 0 if it went meanwhile).
std::optional<fault_driver::holder> holder_of(const std::string& hosts, const std::string& path) {
  std::optional<fault_driver::holder> holder;
  with_own_session(hosts, 10s, [&](session& s) -> asio::awaitable<void> {
    using asio::experimental::as_tuple;
    mutex m(s, path);
    auto [ec, queue] = co_await m.async_contenders(as_tuple(asio::use_awaitable));
    if (!ec && !queue.empty() && queue.front().data.starts_with("worker-")) {
      holder = fault_driver::holder{std::stoi(queue.front().data.substr(7)), 0};
      auto [stat_ec, stat] = co_await s.async_exists(queue.front().node, as_tuple(asio::use_awaitable));
      if (!stat_ec && stat) holder->session = stat->ephemeral_owner;
    }
  });
  return holder;
}

// The sequence ZooKeeper appends to a sequential node's name: its last 10
// characters, whatever the recipe's prefix.
std::string_view sequence_of(std::string_view name) { return name.substr(name.size() - std::min<std::size_t>(name.size(), 10)); }

// Each lock's queue as the servers hold it, in sequence order (its nodes,
// their data and ephemeral owners), on stdout: printed when a worker's
// watchdog found acquires that never completed, while the workers' nodes
// are still there, to be read beside the sessions the workers printed.
void dump_queues(const std::string& hosts, const std::string& root, int locks) {
  with_own_session(hosts, 20s, [&](session& s) -> asio::awaitable<void> {
    using asio::experimental::as_tuple;
    for (int i = 0; i <= locks; ++i) {
      auto path = lock_path(root, i);
      auto [ec, kids] = co_await s.async_get_children(path, as_tuple(asio::use_awaitable));
      std::cout << "queue of " << path << (ec ? " (unreadable: " + ec.message() + ")" : "") << ":\n";
      std::sort(kids.names.begin(), kids.names.end(),
                [](const std::string& a, const std::string& b) { return sequence_of(a) < sequence_of(b); });
      for (auto& name : kids.names) {
        auto [data_ec, got] = co_await s.async_get_data(path + "/" + name, as_tuple(asio::use_awaitable));
        if (data_ec) {
          std::cout << "  " << name << " (" << data_ec.message() << ")\n";
          continue;
        }
        std::cout << "  " << name << " " << got.data << " owner 0x" << std::hex << got.stat.ephemeral_owner
                  << std::dec << " czxid " << got.stat.czxid << '\n';
      }
    }
  });
}

// Until `stop`, every 2 s: each lock's nodes, read after a sync, against the
// deletes a majority of the servers have logged (logged_deletes.hpp); each
// node listed again after a second sync is one ZooKeeper brought back, a
// committed transaction it lost. On a session of its own, beside the
// workers; `bound` at most. Names them on stdout, into `brought_back`.
void watch_for_lost_deletes(const test::zk_servers& servers, const std::string& root, int locks,
                            const std::atomic<bool>& stop, std::chrono::seconds bound,
                            std::set<std::string>& brought_back) {
  logged_deletes deletes(servers.dir(), servers.count());
  with_own_session(servers.hosts(), bound, [&](session& s) -> asio::awaitable<void> {
    using asio::experimental::as_tuple;
    asio::steady_timer pause(co_await asio::this_coro::executor);
    while (!stop) {
      deletes.read_new();
      for (int i = 0; i <= locks; ++i) {
        auto path = lock_path(root, i);
        co_await s.async_sync(path, as_tuple(asio::use_awaitable));
        auto [ec, kids] = co_await s.async_get_children(path, as_tuple(asio::use_awaitable));
        for (auto& name : ec ? std::vector<std::string>{} : kids.names) {
          auto node = path + "/" + name;
          int logged = deletes.servers_logging(node);
          if (logged < deletes.majority() || brought_back.contains(node)) continue;
          // (After a sync a server has applied every proposal the leader
          // made before it: a committed delete, were it not lost.)
          auto [sync_ec] = co_await s.async_sync(path, as_tuple(asio::use_awaitable));
          auto [exists_ec, stat] = co_await s.async_exists(node, as_tuple(asio::use_awaitable));
          if (sync_ec || exists_ec || !stat) continue;
          brought_back.insert(node);
          std::cout << "ensemble: " << node << " is back after " << logged << " of " << servers.count()
                    << " servers logged its delete: ZooKeeper lost a committed transaction" << std::endl;
        }
      }
      pause.expires_after(2s);
      co_await pause.async_wait(as_tuple(asio::use_awaitable));
    }
  });
}

std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

// drive()'s status when the ensemble lost committed transactions: the run
// judges nothing, and main runs another (with the next seed).
constexpr int void_run = 4;
// How many runs main makes at most while each is void.
constexpr int most_runs = 3;

int drive(const driver_options& o) {
  auto plans = plan_locks(o);
  std::cout << "zkasio-chaos: seed " << o.seed << ", " << o.seconds << " s, " << o.workers << " workers x "
            << o.coroutines << " coroutines, " << o.locks << " locks (" << format(plans)
            << ") and a long-hold mutex" << std::endl;
  test::zk_servers servers(test::server_options{.servers = 3});
  std::optional<test::java_program> curator;
  if (o.curator > 0) curator.emplace("tests/chaos/CuratorWorker.java", "CuratorWorker");
  int everyone = o.workers + o.curator;  // zkasio's workers, then Curator's
  std::vector<std::vector<std::unique_ptr<test::tcp_proxy>>> proxies(static_cast<std::size_t>(everyone));
  auto logs_dir = std::filesystem::path(servers.dir()) / "chaos";
  std::filesystem::create_directories(logs_dir);
  auto root = "/zkasio-chaos-" + std::to_string(getpid());
  auto stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(o.seconds);
  worker_options base;
  base.root = root;
  base.locks = o.locks;
  base.plans = plans;
  base.coroutines = o.coroutines;
  base.stop_at = std::chrono::duration_cast<std::chrono::nanoseconds>(stop_at.time_since_epoch()).count();
  auto recipes = format(plans) + ",mutex";  // each lock's, the long-hold lock's last, for Curator's workers

  std::vector<int> pids;
  std::vector<std::unique_ptr<test::process_guard>> guards;  // SIGKILL whatever is left, also on failure
  std::vector<std::string> logs;
  for (int w = 0; w < everyone; ++w) {
    std::string hosts;
    for (int k = 1; k <= servers.count(); ++k) {
      proxies[w].push_back(std::make_unique<test::tcp_proxy>(servers.host(k)));
      hosts += (hosts.empty() ? "" : ",") + proxies[w].back()->address();
    }
    auto options = base;
    options.index = w;
    options.hosts = hosts;
    options.seed = o.seed + static_cast<unsigned>(w);
    options.log = (logs_dir / ("worker-" + std::to_string(w) + ".log")).string();
    logs.push_back(options.log);
    std::vector<std::string> argv{self_executable(), "worker"};
    for (auto& a : worker_arguments(options)) argv.push_back(a);
    if (w >= o.workers)
      argv = curator->with({std::to_string(w), hosts, root, recipes, std::to_string(base.stop_at), options.log,
                            std::to_string(options.seed), std::to_string(base.session_timeout.count()),
                            std::to_string(base.longest_wait.count()), "8"});
    pids.push_back(test::spawn(argv));
    guards.push_back(std::make_unique<test::process_guard>(pids.back()));
  }

  fault_driver faults(servers, proxies, pids, o.workers, o.seed, base.session_timeout,
                      [&] { return holder_of(servers.hosts(), lock_path(root, o.locks)); });
  std::atomic<bool> stop_watching{false};
  std::set<std::string> brought_back;
  std::thread watching([&] {
    watch_for_lost_deletes(servers, root, o.locks, stop_watching, std::chrono::seconds(o.seconds) + 300s,
                           brought_back);
  });
  faults.run_until(stop_at);

  int crashes = 0, curator_crashes = 0;
  bool dumped = false;
  for (int w = 0; w < everyone; ++w) {
    auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(stop_at - std::chrono::steady_clock::now()) +
                 base.longest_wait + 2 * base.session_timeout + 30s;
    int status = test::wait_child(pids[w], limit);
    if (status == 3 && !dumped) {
      dumped = true;
      dump_queues(servers.hosts(), root, o.locks);
    }
    if (status != 0) {
      ++(w < o.workers ? crashes : curator_crashes);
      std::cout << (w < o.workers ? "worker " : "Curator worker ") << w << " exited with status " << status
                << std::endl;
    }
  }
  stop_watching = true;
  watching.join();
  int left = all_nodes_left(servers.hosts(), root, o.locks);

  std::vector<hold_record> holds;
  std::vector<acquire_record> acquires;
  std::vector<final_try> final_tries;
  int orphans = 0, curator_orphans = 0, bad_lines = 0, curator_leaked = 0;
  auto could_not_act = faults.pauses();  // paused workers, and (below) busy strands
  for (int w = 0; w < everyone; ++w) {
    worker_log log;
    std::ifstream in(logs[w]);
    for (std::string line; std::getline(in, line);) parse_line(line, log);
    bool by_curator = w >= o.workers;
    for (auto& h : log.holds) h.curator = by_curator;
    for (auto& a : log.acquires) a.curator = by_curator;
    for (auto& f : log.final_tries) f.curator = by_curator;
    holds.insert(holds.end(), log.holds.begin(), log.holds.end());
    acquires.insert(acquires.end(), log.acquires.begin(), log.acquires.end());
    final_tries.insert(final_tries.end(), log.final_tries.begin(), log.final_tries.end());
    could_not_act.insert(could_not_act.end(), log.busy.begin(), log.busy.end());
    (by_curator ? curator_orphans : orphans) += log.orphans ? std::max(*log.orphans, 0) : 0;
    curator_leaked += log.leaked;  // (only Curator's workers write it)
    // It never counted them: it did not end well.
    if (!log.orphans || *log.orphans < 0) ++(by_curator ? curator_crashes : crashes);
    bad_lines += static_cast<int>(log.bad_lines.size());
  }
  auto v = judge(holds, acquires, could_not_act, std::chrono::nanoseconds(1s).count(), final_tries,
                 std::chrono::nanoseconds(stop_at.time_since_epoch()).count());
  std::ostringstream by_recipe_json;
  for (auto& [recipe_name, n] : v.acquisitions_by_recipe)
    by_recipe_json << (by_recipe_json.tellp() > 0 ? ", " : "") << '"' << recipe_name << "\": " << n;

  std::map<std::string, std::size_t> by_kind;
  std::size_t injected = 0;
  bool every_kind = true;
  for (auto f : all_faults) {
    auto n = faults.injected()[static_cast<std::size_t>(f)];
    by_kind[std::string(name(f))] = n;
    injected += n;
    every_kind = every_kind && n > 0;
  }
  std::ostringstream faults_json;
  for (auto& [kind, n] : by_kind) faults_json << (faults_json.tellp() > 0 ? ", " : "") << '"' << kind << "\": " << n;
  std::ostringstream json;
  json << "{\"seed\": " << o.seed << ", \"seconds\": " << o.seconds << ", \"workers\": " << o.workers
       << ", \"coroutines\": " << o.coroutines << ", \"locks\": " << o.locks
       << ", \"recipes\": \"" << format(plans) << "\", \"acquisitions\": " << v.acquisitions
       << ", \"acquire_failures\": " << v.acquire_failures << ", \"long_holds\": " << v.long_holds
       << ", \"acquisitions_by_recipe\": {" << by_recipe_json.str() << "}"
       << ", \"final_tries\": " << final_tries.size() << ", \"lost_signals\": " << v.lost_signals
       << ", \"holds_cut_by_pause\": " << v.holds_cut_by_pause << ", \"faults\": {" << faults_json.str() << "}"
       << ", \"must_be_zero\": {\"overlaps\": " << v.overlaps << ", \"tokens_out_of_order\": " << v.tokens_out_of_order << ", \"grants_after_loss\": " << v.grants_after_loss
       << ", \"late_acquires\": " << v.late_acquires << ", \"wedged_locks\": " << v.wedged_locks << ", \"nodes_left\": " << (left < 0 ? 1 : left)
       << ", \"orphans\": " << orphans << ", \"crashes\": " << crashes << ", \"unreadable_log_lines\": " << bad_lines
       << "}, \"beside_curator\": {\"workers\": " << o.curator << ", \"acquisitions\": " << v.curator.acquisitions
       << ", \"lost_signals\": " << v.curator.lost_signals << ", \"overlaps\": " << v.curator.overlaps
       << ", \"tokens_out_of_order\": " << v.curator.tokens_out_of_order
       << ", \"grants_after_loss\": " << v.curator.grants_after_loss
       << ", \"late_acquires\": " << v.curator.late_acquires << ", \"wedged_locks\": " << v.curator.wedged_locks
       << ", \"leaked_nodes\": " << curator_leaked << ", \"orphans\": " << curator_orphans
       << ", \"crashes\": " << curator_crashes << "}, \"beside_zookeeper\": {\"nodes_brought_back\": " << brought_back.size()
       << "}}";
  std::cout << "acquisitions " << v.acquisitions << ", failed acquires " << v.acquire_failures << " (timeouts, expiries)"
            << ", final tries " << final_tries.size() << ", holds over 1 s " << v.long_holds << ", lost signals " << v.lost_signals << ", holds cut by a pause of their process " << v.holds_cut_by_pause
            << "\nfaults " << injected << ": " << faults_json.str() << "\nmust be 0: overlaps " << v.overlaps
            << ", tokens out of order " << v.tokens_out_of_order << ", grants after a loss " << v.grants_after_loss
            << ", late acquires " << v.late_acquires
            << ", wedged locks " << v.wedged_locks            << ", nodes left " << left << ", orphans " << orphans << ", crashes " << crashes
            << ", unreadable log lines " << bad_lines << "\nbeside Curator (" << o.curator
            << " workers; counted, not judged): acquisitions " << v.curator.acquisitions << ", lost signals "
            << v.curator.lost_signals << ", overlaps with a Curator hold " << v.curator.overlaps
            << ", tokens out of order next to a Curator grant " << v.curator.tokens_out_of_order
            << ", Curator's grants after a loss " << v.curator.grants_after_loss
            << ", Curator's late acquires " << v.curator.late_acquires << ", wedged locks "
            << v.curator.wedged_locks << ", nodes it lost track of (deleted at its end) " << curator_leaked << ", orphans "
            << curator_orphans << ", crashes " << curator_crashes
            << "\nbeside ZooKeeper: nodes it brought back after a majority of the servers had logged their delete "
            << brought_back.size() << '\n';
  for (auto& e : v.examples) std::cout << "  " << e << '\n';
  std::cout << json.str() << std::endl;
  if (!o.json.empty()) std::ofstream(o.json) << json.str() << '\n';
  bool clean = v.overlaps == 0 && v.tokens_out_of_order == 0 && v.grants_after_loss == 0 && v.late_acquires == 0 && v.wedged_locks == 0 && left == 0 && orphans == 0 &&
               crashes == 0 && bad_lines == 0;
  if (o.seconds >= 60 && !every_kind) {
    std::cout << "not every kind of fault was injected" << std::endl;
    clean = false;
  }
  if (v.acquisitions == 0) {
    std::cout << "no lock was ever granted" << std::endl;
    clean = false;
  }
  if (!brought_back.empty()) {
    // Every figure after such a loss is judged on state the servers
    // themselves broke (its nodes back in live sessions, known to no one; a
    // created node missing from one server's listing): no figure of it
    // tells anything of the library.
    std::cout << "void: ZooKeeper lost committed transactions (" << brought_back.size()
              << " nodes back after their delete; logged_deletes.hpp says which of its bugs)" << std::endl;
    return void_run;
  }
  return clean ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "worker")
      return run_worker(parse_worker_arguments(std::vector<std::string>(argv + 2, argv + argc)));
    auto o = parse(argc, argv);
    for (int run = 1;; ++run, ++o.seed) {
      int status = drive(o);
      if (status != void_run) return status;
      if (run == most_runs) {
        std::cout << "zkasio-chaos: " << run << " runs, each void: nothing judged" << std::endl;
        return 1;
      }
      std::cout << "zkasio-chaos: again, with seed " << o.seed + 1 << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "zkasio-chaos: " << e.what() << '\n';
    return 1;
  }
}
