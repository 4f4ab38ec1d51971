#include "chaos/verdict.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <sstream>
#include <utility>

namespace zkasio::chaos {

std::string_view name(recipe r) {
  switch (r) {
    case recipe::mutex: return "mutex";
    case recipe::handoff_mutex: return "handoff_mutex";
    case recipe::race_mutex: return "race_mutex";
    case recipe::election_fair: return "election_fair";
    case recipe::election_race: return "election_race";
    case recipe::shared_mutex: return "shared_mutex";
    case recipe::semaphore: return "semaphore";
  }
  return "?";
}

std::optional<recipe> recipe_named(std::string_view n) {
  auto known = std::find_if(std::begin(all_recipes), std::end(all_recipes), [&](recipe r) { return name(r) == n; });
  if (known == std::end(all_recipes)) return std::nullopt;
  return *known;
}

std::string format(const hold_record& h) {
  std::ostringstream out;
  out << "hold " << h.worker << ' ' << h.lock << ' ' << h.grant << ' ' << h.end << ' ' << h.token << ' ' << h.local
      << ' ' << (h.lost ? 1 : 0) << ' ' << name(h.kind) << ' ' << (h.reader ? "read" : "write") << ' ' << h.leases << ' '
      << h.capacity << ' ' << h.asked;
  return out.str();
}

std::string format(const final_try& f) {
  return "final " + std::to_string(f.worker) + ' ' + std::to_string(f.lock) + ' ' +
         (f.granted ? "granted" : "refused");
}

std::string format(const pause_window& busy) {
  return "busy " + std::to_string(busy.worker) + ' ' + std::to_string(busy.lock) + ' ' + std::to_string(busy.from) +
         ' ' + std::to_string(busy.to);
}

std::string format(const acquire_record& a) {
  std::ostringstream out;
  out << "acquire " << a.worker << ' ' << a.lock << ' ' << a.start << ' ';
  if (a.end) out << *a.end;
  else out << '-';
  out << ' ' << a.deadline << ' ' << a.result;
  return out.str();
}

void parse_line(std::string_view line, worker_log& log) {
  std::istringstream in{std::string(line)};
  std::string kind, end, extra, recipe_name, mode, outcome;
  hold_record h;
  acquire_record a;
  final_try f;
  pause_window busy;
  int lost = 0, orphans = 0, leaked = 0;
  bool read = false;
  in >> kind;
  if (kind == "hold") {
    read = static_cast<bool>(in >> h.worker >> h.lock >> h.grant >> h.end >> h.token >> h.local >> lost >>
                             recipe_name >> mode >> h.leases >> h.capacity >> h.asked) &&
           (lost == 0 || lost == 1) && (mode == "read" || mode == "write");
    h.lost = lost == 1;
    h.reader = mode == "read";
    auto known = recipe_named(recipe_name);
    read = read && known;
    if (read) h.kind = *known;
  } else if (kind == "final") {
    read = static_cast<bool>(in >> f.worker >> f.lock >> outcome) && (outcome == "granted" || outcome == "refused");
    f.granted = outcome == "granted";
  } else if (kind == "acquire") {
    read = static_cast<bool>(in >> a.worker >> a.lock >> a.start >> end >> a.deadline >> a.result);
    if (read && end != "-") {
      char* stop = nullptr;
      a.end = std::strtoll(end.c_str(), &stop, 10);
      read = stop == end.c_str() + end.size();
    }
  } else if (kind == "orphans") {
    read = static_cast<bool>(in >> h.worker >> orphans);
  } else if (kind == "leaked") {
    read = static_cast<bool>(in >> h.worker >> leaked) && leaked >= 0;
  } else if (kind == "busy") {
    read = static_cast<bool>(in >> busy.worker >> busy.lock >> busy.from >> busy.to) && busy.lock >= 0 &&
           busy.from <= busy.to;
  }
  if (!read || in >> extra) {
    log.bad_lines.emplace_back(line);
    return;
  }
  if (kind == "hold") log.holds.push_back(h);
  if (kind == "acquire") log.acquires.push_back(a);
  if (kind == "final") log.final_tries.push_back(f);
  if (kind == "orphans") log.orphans = orphans;
  if (kind == "leaked") log.leaked += leaked;
  if (kind == "busy") log.busy.push_back(busy);
}

namespace {

// How long after a pause ends a grant decided before it may still reach the
// worker: the handlers queued meanwhile run first.
constexpr ns pause_wake_slack = 1'000'000'000;

bool paused_within(const std::vector<pause_window>& pauses, int worker, int lock, ns from, ns to) {
  return std::any_of(pauses.begin(), pauses.end(),
                     [&](const pause_window& p) { return p.covers(worker, lock) && p.from < to && p.to > from; });
}

// A hold in an example: Curator's say so.
std::string describe(const hold_record& h) { return (h.curator ? "Curator's " : "") + format(h); }

void example(verdict& v, const std::string& what) {
  if (v.examples.size() < 10) v.examples.push_back(what);
}

// Each recipe's rule: may `next` be granted while `held` (the holds of its
// lock object not yet ended) are held?
bool one_at_a_time(const std::vector<const hold_record*>& held, const hold_record&) { return held.empty(); }

bool writers_alone_readers_together(const std::vector<const hold_record*>& held, const hold_record& next) {
  return std::all_of(held.begin(), held.end(), [&](auto* h) { return h->reader && next.reader; });
}

bool at_most_capacity_leases(const std::vector<const hold_record*>& held, const hold_record& next) {
  int leases = next.leases;
  for (auto* h : held) leases += h->leases;
  return leases <= next.capacity;
}

bool admits(const std::vector<const hold_record*>& held, const hold_record& next) {
  switch (next.kind) {
    case recipe::shared_mutex: return writers_alone_readers_together(held, next);
    case recipe::semaphore: return at_most_capacity_leases(held, next);
    default: return one_at_a_time(held, next);
  }
}

// The recipes whose fencing token rises with every grant (an election's with
// every term); a semaphore's and a shared_mutex's holders share the lock.
bool tokens_rise(recipe r) { return r != recipe::semaphore && r != recipe::shared_mutex; }

// A grant's token as it rises: the node's, then (handoff_mutex) the handoffs on it.
std::pair<std::int64_t, std::uint64_t> fence_of(const hold_record& h) { return {h.token, h.local}; }

}  // namespace

namespace {

// A grant asked for before its process's pause and seen just after it: the
// library decided it either before the pause (its completion waiting in the
// stopped process) or after it, and the worker cannot tell which.
bool granted_across(const hold_record& h, const pause_window& p) {
  return p.covers(h.worker, h.lock) && h.asked >= 0 && h.asked <= p.from && p.from < h.grant &&
         h.grant <= p.to + pause_wake_slack;
}

std::size_t hold_violations(const verdict& v) { return v.overlaps + v.tokens_out_of_order + v.grants_after_loss; }

// The verdict with every grant across a pause judged where it was seen
// (`before_pause` false), or at its pause's start, where another hold over
// that moment still overlaps it and its token still must rise.
verdict judge_placed(const std::vector<hold_record>& holds, const std::vector<acquire_record>& acquires,
                     const std::vector<pause_window>& pauses, ns grace, const std::vector<final_try>& final_tries,
                     ns faults_end, bool before_pause) {
  verdict v;
  std::map<int, std::vector<hold_record>> by_lock;
  for (auto h : holds) {
    if (h.curator) {
      ++v.curator.acquisitions;
      v.curator.lost_signals += h.lost;
    } else {
      ++v.acquisitions;
      ++v.acquisitions_by_recipe[std::string(name(h.kind))];
      v.lost_signals += h.lost;
    }
    v.long_holds += h.end - h.grant > 1'000'000'000;
    for (auto& p : pauses) {
      if (!p.covers(h.worker, h.lock)) continue;
      if (before_pause && granted_across(h, p)) {
        h.grant = h.end = p.from;
        ++v.holds_cut_by_pause;
      }
      // A process paused while it held: nothing it did after the pause
      // began is covered by the lock.
      if (p.from >= h.grant && p.from < h.end) {
        h.end = p.from;
        ++v.holds_cut_by_pause;
      }
    }
    by_lock[h.lock].push_back(h);
  }
  for (auto& [lock, list] : by_lock) {
    // (By token as well: holds cut at one pause's start share a time.)
    std::sort(list.begin(), list.end(),
              [](auto& a, auto& b) { return std::pair(a.grant, fence_of(a)) < std::pair(b.grant, fence_of(b)); });
    std::vector<const hold_record*> held;  // the holds before that had not ended at this grant
    const hold_record* greatest_zkasio = nullptr;  // of the zkasio grants so far, the greatest token
    const hold_record* previous = nullptr;         // the grant before, its token known
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto& h = list[i];
      std::erase_if(held, [&](auto* earlier) { return earlier->end <= h.grant; });
      std::vector<const hold_record*> zkasio_held;
      std::copy_if(held.begin(), held.end(), std::back_inserter(zkasio_held), [](auto* e) { return !e->curator; });
      bool zkasio_pair = !h.curator && !admits(zkasio_held, h);
      if (zkasio_pair || !admits(held, h)) {
        ++(zkasio_pair ? v.overlaps : v.curator.overlaps);
        example(v, "lock " + std::to_string(lock) + ": " + describe(h) + " began beside " +
                       std::to_string(held.size()) + " holds" + (held.empty() ? "" : ", one " + describe(*held.front())));
      }
      // zkasio's grants against the greatest earlier zkasio grant (a
      // Curator grant between them hides nothing); against a Curator grant
      // just before, or Curator's own, apart. (A Curator token of 0: not
      // known, compared with nothing.)
      if (tokens_rise(h.kind) && (!h.curator || h.token != 0)) {
        if (!h.curator && greatest_zkasio && fence_of(h) <= fence_of(*greatest_zkasio)) {
          ++v.tokens_out_of_order;
          example(v, "lock " + std::to_string(lock) + ": token of " + describe(h) + " not above " +
                         describe(*greatest_zkasio));
        } else if (previous && (h.curator || previous->curator) && fence_of(h) <= fence_of(*previous)) {
          ++v.curator.tokens_out_of_order;
          example(v, "lock " + std::to_string(lock) + ": token of " + describe(h) + " not above " + describe(*previous));
        }
      }
      if (tokens_rise(h.kind) && !h.curator && (!greatest_zkasio || fence_of(h) > fence_of(*greatest_zkasio)))
        greatest_zkasio = &h;
      if (!h.curator || h.token != 0) previous = &h;
      held.push_back(&h);
    }
    // A node whose zkasio holder was told it was lost is granted no more (a
    // reentry, or a hand-over in memory, of a lost hold): its token, the
    // node's czxid, in no later grant. (Not keyed on Curator's holds: its
    // token is looked up after its grant, and after a fault may be
    // another's node.)
    std::map<std::int64_t, ns> lost_at;  // token -> the first lost signal
    for (auto& h : list)
      if (h.lost && !h.curator && h.token != 0 && (!lost_at.count(h.token) || h.end < lost_at[h.token]))
        lost_at[h.token] = h.end;
    for (auto& h : list)
      if (auto it = lost_at.find(h.token); it != lost_at.end() && h.grant > it->second) {
        ++(h.curator ? v.curator.grants_after_loss : v.grants_after_loss);
        example(v, "lock " + std::to_string(lock) + ": " + describe(h) + " granted after its node's loss was told");
      }
  }
  for (auto& f : final_tries)
    if (!f.granted) {
      ++(f.curator ? v.curator.wedged_locks : v.wedged_locks);
      example(v, std::string(f.curator ? "Curator: " : "") + "a free lock not granted: " + format(f));
    }
  // Without a deadline, an acquire must complete once the faults stop and
  // those that may be ahead of it, holding the queue, are gone: the acquires
  // with a deadline, or Curator's, at its lock, started before it or during
  // the faults (a semaphore's acquire holds its mutex while it waits for
  // room; Curator's acquires overrun their deadlines under faults). Not
  // the final tries, which start after the faults, behind it.
  // By lock: those acquires' starts in order, each with the latest end of
  // those started until then.
  std::map<int, std::vector<std::pair<ns, ns>>> bounded;
  for (auto& b : acquires)
    if ((b.deadline >= 0 || b.curator) && b.end) bounded[b.lock].emplace_back(b.start, *b.end);
  for (auto& [lock, starts] : bounded) {
    std::sort(starts.begin(), starts.end());
    for (std::size_t i = 1; i < starts.size(); ++i) starts[i].second = std::max(starts[i].second, starts[i - 1].second);
  }
  auto due_without_deadline = [&](const acquire_record& a) {
    auto& starts = bounded[a.lock];
    auto after = std::lower_bound(starts.begin(), starts.end(), std::pair(std::max(a.start, faults_end), ns{0}));
    return after == starts.begin() ? faults_end : std::max(faults_end, std::prev(after)->second);
  };
  for (auto& a : acquires) {
    if (a.result != "ok" && !a.curator) ++v.acquire_failures;
    ns due = (a.deadline < 0 ? due_without_deadline(a) : a.deadline) + grace;
    bool late = !a.end || (*a.end > due && !paused_within(pauses, a.worker, a.lock, a.start, *a.end));
    if (late) {
      ++(a.curator ? v.curator.late_acquires : v.late_acquires);
      example(v, std::string(a.curator ? "Curator: " : "") + (a.end ? "late: " : "never completed: ") + format(a));
    }
  }
  return v;
}

}  // namespace

// A grant across a pause is judged in the place that explains it: where it
// was seen, unless that breaks a rule that judging every such grant at its
// pause's start does not. (A real violation breaks a rule in both places.)
verdict judge(const std::vector<hold_record>& holds, const std::vector<acquire_record>& acquires,
              const std::vector<pause_window>& pauses, ns grace, const std::vector<final_try>& final_tries,
              ns faults_end) {
  auto seen = judge_placed(holds, acquires, pauses, grace, final_tries, faults_end, false);
  bool across = std::any_of(holds.begin(), holds.end(), [&](const hold_record& h) {
    return std::any_of(pauses.begin(), pauses.end(), [&](const pause_window& p) { return granted_across(h, p); });
  });
  if (!across || hold_violations(seen) == 0) return seen;
  auto before = judge_placed(holds, acquires, pauses, grace, final_tries, faults_end, true);
  return hold_violations(before) < hold_violations(seen) ? before : seen;
}

}  // namespace zkasio::chaos
