#include "chaos/verdict.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

namespace zkasio::chaos {

std::string format(const hold_record& h) {
  std::ostringstream out;
  out << "hold " << h.worker << ' ' << h.lock << ' ' << h.grant << ' ' << h.end << ' ' << h.token << ' '
      << (h.lost ? 1 : 0);
  return out.str();
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
  std::string kind, end, extra;
  hold_record h;
  acquire_record a;
  int lost = 0, orphans = 0;
  bool read = false;
  in >> kind;
  if (kind == "hold") {
    read = static_cast<bool>(in >> h.worker >> h.lock >> h.grant >> h.end >> h.token >> lost) && (lost == 0 || lost == 1);
    h.lost = lost == 1;
  } else if (kind == "acquire") {
    read = static_cast<bool>(in >> a.worker >> a.lock >> a.start >> end >> a.deadline >> a.result);
    if (read && end != "-") {
      char* stop = nullptr;
      a.end = std::strtoll(end.c_str(), &stop, 10);
      read = stop == end.c_str() + end.size();
    }
  } else if (kind == "orphans") {
    read = static_cast<bool>(in >> h.worker >> orphans);
  }
  if (!read || in >> extra) {
    log.bad_lines.emplace_back(line);
    return;
  }
  if (kind == "hold") log.holds.push_back(h);
  if (kind == "acquire") log.acquires.push_back(a);
  if (kind == "orphans") log.orphans = orphans;
}

namespace {

bool paused_within(const std::vector<pause_window>& pauses, int worker, ns from, ns to) {
  return std::any_of(pauses.begin(), pauses.end(),
                     [&](const pause_window& p) { return p.worker == worker && p.from < to && p.to > from; });
}

void example(verdict& v, const std::string& what) {
  if (v.examples.size() < 10) v.examples.push_back(what);
}

}  // namespace

verdict judge(const std::vector<hold_record>& holds, const std::vector<acquire_record>& acquires,
              const std::vector<pause_window>& pauses, ns grace) {
  verdict v;
  std::map<int, std::vector<hold_record>> by_lock;
  for (auto h : holds) {
    ++v.acquisitions;
    v.lost_signals += h.lost;
    v.long_holds += h.end - h.grant > 1'000'000'000;
    // A process paused while it held: nothing it did after the pause began
    // is covered by the lock.
    for (auto& p : pauses)
      if (p.worker == h.worker && p.from >= h.grant && p.from < h.end) {
        h.end = p.from;
        ++v.holds_cut_by_pause;
      }
    by_lock[h.lock].push_back(h);
  }
  for (auto& [lock, list] : by_lock) {
    std::sort(list.begin(), list.end(), [](auto& a, auto& b) { return a.grant < b.grant; });
    const hold_record* latest_end = nullptr;  // of the holds before, the one that ended last
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto& h = list[i];
      if (latest_end && h.grant < latest_end->end) {
        ++v.overlaps;
        example(v, "lock " + std::to_string(lock) + ": " + format(h) + " began before " + format(*latest_end) +
                       " ended");
      }
      if (i > 0 && h.token <= list[i - 1].token) {
        ++v.tokens_out_of_order;
        example(v, "lock " + std::to_string(lock) + ": token of " + format(h) + " not above " + format(list[i - 1]));
      }
      if (!latest_end || h.end > latest_end->end) latest_end = &h;
    }
  }
  for (auto& a : acquires) {
    if (a.result != "ok") ++v.acquire_failures;
    bool late = !a.end || (*a.end > a.deadline + grace && !paused_within(pauses, a.worker, a.start, *a.end));
    if (late) {
      ++v.late_acquires;
      example(v, (a.end ? "late: " : "never completed: ") + format(a));
    }
  }
  return v;
}

}  // namespace zkasio::chaos
