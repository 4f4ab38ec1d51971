// The lock's decisions without a server: names, ordering (across the wrap of
// the server's counter), verdicts, what the process knows of its nodes, and
// which node a user's own recipe may hold.
#include <doctest/doctest.h>

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "recipes/process_wide/known_nodes.hpp"
#include "recipes/rules/decisions.hpp"
#include "recipes/rules/lock_queue.hpp"
#include "recipes/rules/queue_rule.hpp"

using namespace zkasio;
using namespace zkasio::detail;

namespace {
const std::string uuid_a = "0f8fad5b-d9cb-469f-a165-70867728950e";
const std::string uuid_b = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const std::string uuid_c = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
std::string node(const std::string& uuid, const std::string& sequence) {
  return lock_node_prefix(uuid) + sequence;
}
// The name the server gives the node made when its counter was `counter`.
std::string node_at(const std::string& uuid, std::int32_t counter, node_kind kind = node_kind::lock) {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%010d", counter);
  return lock_node_prefix(uuid, kind) + suffix;
}
lock_node parsed(const std::string& name) { return *parse_lock_node(name); }
std::vector<std::string> names_of(const std::vector<lock_node>& queue) {
  std::vector<std::string> names;
  for (auto& n : queue) names.push_back(n.name);
  return names;
}
queue_view view_knowing(std::vector<lock_node> queue, std::set<std::string> known) {
  return make_view(std::move(queue), [&](const lock_node& n) { return known.count(n.name) > 0; });
}
}  // namespace

TEST_CASE("lock node names are Curator's protected names") {
  CHECK(lock_node_prefix(uuid_a) == "_c_" + uuid_a + "-lock-");
  auto parsed = parse_lock_node(node(uuid_a, "0000000042"));
  REQUIRE(parsed.has_value());
  CHECK(parsed->uuid() == uuid_a);
  CHECK(parsed->sequence == 42);

  const std::vector<std::string> bad_names{"", "lock-0000000001", "_c_" + uuid_a + "-lock-", node(uuid_a, "00000001"),
                          node(uuid_a, "00000000012"), node(uuid_a, "00000x0001"),
                          "_c_" + uuid_a + "-read-0000000001", "_c_not-a-uuid-at-all-0000-000000000000-lock-0000000001",
                          "_x_" + uuid_a + "-lock-0000000001", "garbage\n\x01"};
  for (const auto& bad : bad_names) {
    CAPTURE(bad);
    CHECK_FALSE(parse_lock_node(bad).has_value());
  }
}

TEST_CASE("sequence suffixes: exactly what the server writes, also past 2^31") {
  CHECK(parse_sequence("0000000000") == 0u);
  CHECK(parse_sequence("2147483647") == 0x7fffffffu);
  // printf("%010d") of the wrapped counter: ten characters down to -999,999,999, then eleven.
  CHECK(parse_sequence("-000000007") == static_cast<sequence_number>(-7));
  CHECK(parse_sequence("-999999999") == static_cast<sequence_number>(-999'999'999));
  CHECK(parse_sequence("-1000000000") == static_cast<sequence_number>(-1'000'000'000));
  CHECK(parse_sequence("-2147483648") == 0x80000000u);
  CHECK(parse_lock_node(node(uuid_a, "-2147483648"))->sequence == 0x80000000u);
  for (const char* bad : {"", "000000001", "00000000001", "+000000001", "-000000000", "-0000000001",
                          "2147483648", "-2147483649", "9999999999", "-99999999999", "00000 0001", "-00000000a"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_sequence(bad).has_value());
  }
  // Every value the counter takes parses back to itself.
  std::mt19937 random(7);
  for (int i = 0; i < 10'000; ++i) {
    auto counter = static_cast<std::int32_t>(random());
    char text[16];
    std::snprintf(text, sizeof text, "%010d", counter);
    CAPTURE(text);
    CHECK(parse_sequence(text) == static_cast<sequence_number>(counter));
  }
}

TEST_CASE("make_uuid gives distinct version-4 UUIDs that parse back") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto u = std::string(make_uuid().view());
    CHECK(u.size() == 36);
    CHECK(u[14] == '4');
    CHECK(std::string("89ab").find(u[19]) != std::string::npos);
    CHECK(parse_lock_node(node(u, "0000000001")).has_value());
    seen.insert(u);
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("the queue is ordered by sequence number, not by name, and ignores other children") {
  // By whole name uuid_b < uuid_c < uuid_a would give another order.
  std::vector<std::string> children{node(uuid_c, "0000000003"), "config", node(uuid_a, "0000000010"),
                                    "_c_junk", node(uuid_b, "0000000002"), "lock-0000000001"};
  auto queue = lock_queue(children);
  REQUIRE(queue.size() == 3);
  CHECK(queue[0].uuid() == uuid_b);
  CHECK(queue[1].uuid() == uuid_c);
  CHECK(queue[2].uuid() == uuid_a);
}

TEST_CASE("the queue follows the server's counter across its wraps") {
  // Past 2^31-1 the counter is negative; past -1 it is 0 again.
  for (std::int64_t start : {std::int64_t{2147483645}, std::int64_t{-3}, std::int64_t{-1000000002}, std::int64_t{0}}) {
    CAPTURE(start);
    std::vector<std::string> in_order;
    for (std::int64_t k = 0; k < 6; ++k)
      in_order.push_back(node_at(k % 2 ? uuid_a : uuid_b, static_cast<std::int32_t>(static_cast<std::uint32_t>(start + k))));
    auto shuffled = in_order;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(static_cast<unsigned>(start)));
    CHECK(names_of(lock_queue(shuffled)) == in_order);
    // Who waits for whom follows the same order.
    auto view = view_knowing(lock_queue(shuffled), {});
    CHECK(decide(view, parsed(in_order[0])).what == lock_verdict::held);
    for (std::size_t i = 1; i < in_order.size(); ++i) {
      auto verdict = decide(view, parsed(in_order[i]));
      CHECK(verdict.what == lock_verdict::wait);
      CHECK(verdict.predecessor == in_order[i - 1]);
    }
  }
  CHECK(sequence_before(0x7fffffffu, 0x80000000u));
  CHECK(sequence_before(0xffffffffu, 0u));
  CHECK_FALSE(sequence_before(0u, 0xffffffffu));
  CHECK_FALSE(sequence_before(5u, 5u));
}

TEST_CASE("the queue's order is: from the sequence after the widest gap, round the counter, then by name") {
  // The rule spelled out the plain way (a second sort by the key from that
  // origin), against lock_queue's one sort and rotation, on random listings
  // with repeated sequences, equal widest gaps and the counter's wrap.
  auto by_the_rule = [](std::vector<std::string> names) {
    std::vector<lock_node> nodes;
    for (auto& name : names) nodes.push_back(parsed(name));
    std::vector<sequence_number> sorted;
    for (auto& n : nodes) sorted.push_back(n.sequence);
    std::sort(sorted.begin(), sorted.end());
    sequence_number origin = sorted.front();
    auto widest = static_cast<std::uint32_t>(sorted.front() - sorted.back());
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (auto gap = static_cast<std::uint32_t>(sorted[i] - sorted[i - 1]); gap > widest) widest = gap, origin = sorted[i];
    std::sort(nodes.begin(), nodes.end(), [origin](const lock_node& a, const lock_node& b) {
      auto ka = static_cast<std::uint32_t>(a.sequence - origin), kb = static_cast<std::uint32_t>(b.sequence - origin);
      return ka != kb ? ka < kb : a.name < b.name;
    });
    std::vector<std::string> order;
    for (auto& n : nodes) order.push_back(n.name);
    return order;
  };
  std::mt19937 random(5);
  const std::string uuids[] = {uuid_a, uuid_b, uuid_c};
  for (int round = 0; round < 2000; ++round) {
    // Sequences from a few bases (near 0, near 2^31, near 2^32), a few apart,
    // so that duplicates and equal gaps are common.
    const std::uint32_t bases[] = {0u, 0x7ffffffdu, 0xfffffffdu, 1000u};
    std::vector<std::string> names;
    int count = 1 + static_cast<int>(random() % 7);
    for (int i = 0; i < count; ++i) {
      auto sequence = bases[random() % 4] + static_cast<std::uint32_t>(random() % 5);
      names.push_back(node_at(uuids[random() % 3], static_cast<std::int32_t>(sequence)));
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    std::shuffle(names.begin(), names.end(), random);
    CAPTURE(round);
    CHECK(names_of(lock_queue(names)) == by_the_rule(names));
  }
}

TEST_CASE("any listing sorts without harm: garbage is ignored, valid names keep the counter's order") {
  std::mt19937 random(11);
  auto garbage = [&] {
    std::string s;
    for (int n = static_cast<int>(random() % 60); n > 0; --n) s += static_cast<char>(random() % 128);
    return s;
  };
  for (int round = 0; round < 200; ++round) {
    // A queue of up to 50 nodes somewhere on the counter, among garbage.
    std::uint32_t counter = random();
    std::vector<std::string> valid, children;
    for (std::uint32_t k = 0, n = random() % 50; k < n; ++k, counter += 1 + random() % 1000)
      valid.push_back(node_at(uuid_a, static_cast<std::int32_t>(counter)));
    children = valid;
    for (int g = 0; g < 20; ++g) children.push_back(random() % 2 ? garbage() : node(uuid_b, garbage().substr(0, 11)));
    std::shuffle(children.begin(), children.end(), random);
    auto queue = lock_queue(children);
    std::vector<std::string> valid_seen;
    for (auto& n : queue)
      if (std::find(valid.begin(), valid.end(), n.name) != valid.end()) valid_seen.push_back(n.name);
    CHECK(valid_seen == valid);
  }
}

TEST_CASE("verdicts: first holds, others wait for their immediate predecessor only") {
  auto a = node(uuid_a, "0000000001"), b = node(uuid_b, "0000000002"), c = node(uuid_c, "0000000003");
  auto queue = view_knowing(lock_queue({c, a, b}), {});
  CHECK(decide(queue, parsed(a)).what == lock_verdict::held);

  auto vb = decide(queue, parsed(b));
  CHECK(vb.what == lock_verdict::wait);
  CHECK(vb.predecessor == a);
  CHECK_FALSE(vb.relist_after);  // nothing below a: once a goes, b is first

  auto vc = decide(queue, parsed(c));
  CHECK(vc.what == lock_verdict::wait);
  CHECK(vc.predecessor == b);  // not a: no herd
  CHECK(vc.relist_after);      // a belongs to someone else and may still be there

  CHECK(decide(queue, parsed(node(uuid_a, "0000000009"))).what == lock_verdict::missing);
  CHECK(decide(view_knowing({}, {}), parsed(a)).what == lock_verdict::missing);
  // Same sequence, another name (the parent was re-created): not mine.
  CHECK(decide(queue, parsed(node(uuid_c, "0000000001"))).what == lock_verdict::missing);
}

TEST_CASE("known nodes below the predecessor need no new listing") {
  auto a = node(uuid_a, "0000000001"), b = node(uuid_b, "0000000002"), c = node(uuid_c, "0000000003"),
       d = node(uuid_a, "0000000004");
  auto queue = view_knowing(lock_queue({d, c, b, a}), {a, b, d});  // c is another process's
  std::vector<std::uint32_t> others;
  for (const auto& ahead : queue.before) others.push_back(ahead.others);
  CHECK(others == std::vector<std::uint32_t>{0, 0, 0, 1});
  auto vc = decide(queue, parsed(c));
  CHECK(vc.predecessor == b);
  CHECK_FALSE(vc.relist_after);  // only known nodes (a) below b
  auto vd = decide(queue, parsed(d));
  CHECK(vd.predecessor == c);
  CHECK_FALSE(vd.relist_after);
}

TEST_CASE("a semaphore's room: every child takes a slot, and all of mine must be there") {
  auto l1 = node_at(uuid_a, 1, node_kind::lease), l2 = node_at(uuid_b, 2, node_kind::lease),
       l3 = node_at(uuid_c, 3, node_kind::lease);
  CHECK(lease_queue.room_for({l1, l2}, {l2}, 2) == room_verdict::granted);
  CHECK(lease_queue.room_for({l1, l2, l3}, {l3}, 2) == room_verdict::wait);
  CHECK(lease_queue.room_for({l1, l2, l3}, {l2, l3}, 3) == room_verdict::granted);  // several at once
  CHECK(lease_queue.room_for({l1, l3}, {l2, l3}, 3) == room_verdict::missing);     // one of mine deleted
  CHECK(lease_queue.room_for({l1, "garbage", l2}, {l2}, 2) == room_verdict::wait);  // as Curator counts
  CHECK(lease_queue.room_for({}, {l1}, 1) == room_verdict::missing);
}

TEST_CASE("finding a node by its uuid after a lost create reply") {
  std::vector<std::string> children{node(uuid_b, "0000000002"), "other", node(uuid_a, "0000000005")};
  auto queue = lock_queue(children);
  auto found = find_by_uuid(queue, uuid_a);
  REQUIRE(found);
  CHECK(found->name == node(uuid_a, "0000000005"));
  CHECK_FALSE(find_by_uuid(queue, uuid_c));
}

// ---------------------------------------------------------- read/write rule

namespace {
std::string reader(const std::string& uuid, std::int32_t counter) { return node_at(uuid, counter, node_kind::read); }
std::string writer(const std::string& uuid, std::int32_t counter) { return node_at(uuid, counter, node_kind::write); }
}  // namespace

TEST_CASE("read/write nodes are Curator's InterProcessReadWriteLock names, in the lock's sequence space") {
  CHECK(lock_node_prefix(uuid_a, node_kind::read) == "_c_" + uuid_a + "-__READ__");
  CHECK(lock_node_prefix(uuid_a, node_kind::write) == "_c_" + uuid_a + "-__WRIT__");
  auto r = parse_lock_node(reader(uuid_a, 7));
  REQUIRE(r.has_value());
  CHECK(r->kind == node_kind::read);
  CHECK(r->sequence == 7);
  CHECK(parse_lock_node(writer(uuid_b, -5))->kind == node_kind::write);
  for (const auto& bad : {"_c_" + uuid_a + "-__READ_0000000001", "_c_" + uuid_a + "-__READ__000000001",
                          "_c_" + uuid_a + "-__WRIT__0000000001x", "_c_" + uuid_a + "__WRIT__0000000001",
                          "_c_" + uuid_a + "-latch0000000001", "_c_" + uuid_a + "-__read__0000000001"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_lock_node(bad).has_value());
  }
  // One path, two recipes: each queue holds its own nodes only.
  std::vector<std::string> children{writer(uuid_a, 4), node_at(uuid_b, 2), reader(uuid_c, 3), "garbage",
                                    reader(uuid_a, 1), "_c_" + uuid_a + "-latch-0000000005"};
  CHECK(names_of(lock_queue(children, queue_family::read_write)) ==
        std::vector<std::string>{reader(uuid_a, 1), reader(uuid_c, 3), writer(uuid_a, 4)});
  CHECK(names_of(lock_queue(children, queue_family::mutex)) == std::vector<std::string>{node_at(uuid_b, 2)});
}

TEST_CASE("election candidates are Curator's LeaderLatch names: their own queue, each waiting for the one just ahead") {
  CHECK(lock_node_prefix(uuid_a, node_kind::latch) == "_c_" + uuid_a + "-latch-");
  auto l1 = node_at(uuid_a, 1, node_kind::latch), l3 = node_at(uuid_b, 3, node_kind::latch),
       l4 = node_at(uuid_c, 4, node_kind::latch);
  REQUIRE(parse_lock_node(l3).has_value());
  CHECK(parse_lock_node(l3)->kind == node_kind::latch);
  std::vector<std::string> children{l4, node_at(uuid_b, 2), l1, reader(uuid_c, 5), "garbage", l3};
  CHECK(names_of(lock_queue(children, queue_family::election)) == std::vector<std::string>{l1, l3, l4});
  CHECK(names_of(lock_queue(children, queue_family::mutex)) == std::vector<std::string>{node_at(uuid_b, 2)});
  CHECK(lock_queue(children, queue_family::race).empty());  // the race recipes have no queue
  auto queue = view_knowing(lock_queue(children, queue_family::election), {});
  CHECK(decide(queue, *parse_lock_node(l1)).what == lock_verdict::held);
  auto last = decide(queue, *parse_lock_node(l4));
  CHECK(last.what == lock_verdict::wait);
  CHECK(last.predecessor == l3);
  CHECK_FALSE(queue_rule::of(queue_family::election).in_queue(node_kind::lock));
}

TEST_CASE("one rule per recipe: each kind of node is of one recipe's queue, and its rule is the one it is decided by") {
  const node_kind kinds[] = {node_kind::lock, node_kind::read, node_kind::write, node_kind::lease, node_kind::latch};
  const queue_family families[] = {queue_family::mutex, queue_family::read_write, queue_family::semaphore,
                                   queue_family::election, queue_family::race};
  for (auto kind : kinds) {
    int queues = 0;
    for (auto family : families)
      if (queue_rule::of(family).in_queue(kind)) {
        ++queues;
        CHECK(&queue_rule::of(kind) == &queue_rule::of(family));
      }
    CHECK(queues == 1);
    CHECK_FALSE(queue_rule::of(queue_family::race).in_queue(kind));  // the race recipes queue nothing
  }
  // Only a reader is let past a node ahead: by a reader; a writer blocks everyone.
  CHECK_FALSE(read_write_queue.blocks(node_kind::read, node_kind::read));
  CHECK(read_write_queue.blocks(node_kind::read, node_kind::write));
  CHECK(read_write_queue.blocks(node_kind::write, node_kind::read));
  CHECK(mutex_queue.blocks(node_kind::lock, node_kind::lock));
}

TEST_CASE("read/write verdicts: a writer waits for the node just ahead, a reader for the nearest writer ahead") {
  // W1 R2 R3 W4 R5 R6 W7
  auto w1 = writer(uuid_a, 1), r2 = reader(uuid_b, 2), r3 = reader(uuid_c, 3), w4 = writer(uuid_a, 4),
       r5 = reader(uuid_b, 5), r6 = reader(uuid_c, 6), w7 = writer(uuid_b, 7);
  auto queue = view_knowing(lock_queue({r6, w7, r3, w1, r5, w4, r2}, queue_family::read_write), {});
  auto predecessor = [&](const std::string& name) {
    auto v = decide(queue, parsed(name));
    return v.what == lock_verdict::held ? std::string("held") : v.predecessor;
  };
  CHECK(predecessor(w1) == "held");
  CHECK(predecessor(r2) == w1);
  CHECK(predecessor(r3) == w1);  // not r2: readers share
  CHECK(predecessor(w4) == r3);  // a writer waits for readers too
  CHECK(predecessor(r5) == w4);  // the writer ahead keeps later readers out
  CHECK(predecessor(r6) == w4);
  CHECK(predecessor(w7) == r6);
  // W1 gone: both readers hold at once; the rest still wait.
  auto after = view_knowing(lock_queue({r6, w7, r3, r5, w4, r2}, queue_family::read_write), {});
  CHECK(decide(after, parsed(r2)).what == lock_verdict::held);
  CHECK(decide(after, parsed(r3)).what == lock_verdict::held);
  CHECK(decide(after, parsed(w4)).predecessor == r3);
}

TEST_CASE("a reader never waits for a writer that came after it (kazoo #649's deadlock)") {
  auto r1 = reader(uuid_a, 1), w2 = writer(uuid_b, 2), r3 = reader(uuid_c, 3), w9 = writer(uuid_a, 9);
  auto queue = view_knowing(lock_queue({w9, r3, w2, r1}, queue_family::read_write), {});
  CHECK(decide(queue, parsed(r1)).what == lock_verdict::held);
  CHECK(decide(queue, parsed(w2)).predecessor == r1);
  CHECK(decide(queue, parsed(r3)).predecessor == w2);  // not w9
  // Across the counter's wrap as well.
  auto r_late = reader(uuid_a, -2147483647), w_early = writer(uuid_b, 2147483646), w_later = writer(uuid_c, -2147483640);
  auto wrapped = view_knowing(lock_queue({w_later, r_late, w_early}, queue_family::read_write), {});
  CHECK(decide(wrapped, parsed(r_late)).predecessor == w_early);
  CHECK(decide(wrapped, parsed(w_later)).predecessor == r_late);
}

TEST_CASE("read/write: what a reader must list again for is only an unknown writer") {
  // W1 (another process) R2 (another) W3 (known) R4 (mine)
  auto w1 = writer(uuid_a, 1), r2 = reader(uuid_b, 2), w3 = writer(uuid_c, 3), r4 = reader(uuid_a, 4);
  auto one_writer_unknown = view_knowing(lock_queue({w1, r2, w3, r4}, queue_family::read_write), {w3, r4});
  auto v = decide(one_writer_unknown, parsed(r4));
  CHECK(v.predecessor == w3);
  CHECK(v.relist_after);  // W1 may still be there once W3 goes
  auto only_reader_unknown = view_knowing(lock_queue({r2, w3, r4}, queue_family::read_write), {w3, r4});
  v = decide(only_reader_unknown, parsed(r4));
  CHECK(v.predecessor == w3);
  CHECK_FALSE(v.relist_after);  // R2 never blocks a reader
  // A writer behind the reader: every unknown node counts.
  auto w5 = writer(uuid_b, 5);
  auto v5 = decide(view_knowing(lock_queue({r2, w3, r4, w5}, queue_family::read_write), {w3, r4, w5}), parsed(w5));
  CHECK(v5.predecessor == r4);
  CHECK(v5.relist_after);
}

TEST_CASE("read/write: a writer behind a writer of another process lists again once it goes (it may have downgraded)") {
  auto w1 = writer(uuid_a, 1), w2 = writer(uuid_b, 2), r3 = reader(uuid_c, 3);
  auto other_process = view_knowing(lock_queue({w1, w2}, queue_family::read_write), {w2});
  CHECK(decide(other_process, parsed(w2)).relist_after);
  auto this_process = view_knowing(lock_queue({w1, w2}, queue_family::read_write), {w1, w2});
  CHECK_FALSE(decide(this_process, parsed(w2)).relist_after);  // its downgrade would be known here
  // A reader ahead never downgrades; a reader never waits for a read node.
  auto r0 = reader(uuid_c, 0);
  CHECK_FALSE(decide(view_knowing(lock_queue({r0, w2}, queue_family::read_write), {w2}), parsed(w2)).relist_after);
  CHECK_FALSE(decide(view_knowing(lock_queue({w2, r3}, queue_family::read_write), {r3}), parsed(r3)).relist_after);
}

TEST_CASE("read/write: a downgrade's read node at its write node's place is granted; writers behind still wait") {
  // The owner holds W3; its read node takes sequence 3 too; W5 queued behind.
  auto w3 = writer(uuid_a, 3), r3 = reader(uuid_b, 3), w5 = writer(uuid_c, 5), r1 = reader(uuid_c, 1);
  auto queue = view_knowing(lock_queue({w5, r3, w3}, queue_family::read_write), {});
  CHECK(decide(queue, parsed(r3), w3).what == lock_verdict::held);
  CHECK(decide(queue, parsed(r3)).what != lock_verdict::held);  // not exempt: W3 may block it
  auto v5 = decide(queue, parsed(w5));
  REQUIRE(v5.what == lock_verdict::wait);
  CHECK((v5.predecessor == r3 || v5.predecessor == w3));
  // The write lock released: the writer behind waits for the read node.
  CHECK(decide(view_knowing(lock_queue({w5, r3}, queue_family::read_write), {}), parsed(w5)).predecessor == r3);
  // An earlier reader does not change the downgrade's verdict.
  CHECK(decide(view_knowing(lock_queue({w5, r3, w3, r1}, queue_family::read_write), {}), parsed(r3), w3).what ==
        lock_verdict::held);
}

TEST_CASE("read/write verdicts agree with the rule written plainly, for random queues") {
  std::mt19937 random(23);
  for (int round = 0; round < 300; ++round) {
    std::uint32_t counter = random();
    std::vector<std::string> names;
    std::set<std::string> known;
    for (std::uint32_t k = 0, n = 1 + random() % 30; k < n; ++k, counter += 1 + random() % 3) {
      auto name = random() % 3 ? reader(uuid_a, static_cast<std::int32_t>(counter)) : writer(uuid_b, static_cast<std::int32_t>(counter));
      names.push_back(name);
      if (random() % 2) known.insert(name);
    }
    auto shuffled = names;
    std::shuffle(shuffled.begin(), shuffled.end(), random);
    auto view = view_knowing(lock_queue(shuffled, queue_family::read_write), known);
    for (std::size_t i = 0; i < names.size(); ++i) {
      auto mine = parsed(names[i]);
      // The nearest node ahead that blocks mine; unknown blocking nodes ahead of it.
      std::optional<std::size_t> nearest;
      for (std::size_t j = i; j-- > 0;)
        if (read_write_queue.blocks(mine.kind, parsed(names[j]).kind)) {
          nearest = j;
          break;
        }
      auto v = decide(view, mine);
      CAPTURE(round);
      CAPTURE(i);
      if (!nearest) {
        CHECK(v.what == lock_verdict::held);
        continue;
      }
      bool unknown_ahead = false;
      for (std::size_t j = 0; j < *nearest; ++j)
        unknown_ahead = unknown_ahead || (read_write_queue.blocks(mine.kind, parsed(names[j]).kind) && !known.count(names[j]));
      // A writer ahead that this process does not know may downgrade: its read
      // node would appear at its place, and block a writer.
      bool may_downgrade = mine.kind == node_kind::write && parsed(names[*nearest]).kind == node_kind::write &&
                           !known.count(names[*nearest]);
      CHECK(v.what == lock_verdict::wait);
      CHECK(v.predecessor == names[*nearest]);
      CHECK(v.relist_after == (unknown_ahead || may_downgrade));
    }
  }
}

namespace {

// A session's engine as known_nodes sees it: a state and a generation.
class fake_core final : public session_core {
 public:
  explicit fake_core(const asio::any_io_executor& executor) : session_core(executor) {
    state_ = session_state::connected;
  }
  void set(session_state s) { state_ = s; }
  void next_generation() { ++generation_; }
  void connect(completion_ptr<>) override {}
  void wait_state_change(session_state, completion_ptr<session_state>) override {}
  void create(std::string, std::string, create_options, std::optional<std::uint64_t>, completion_ptr<created>) override {}
  void remove(std::string, std::int32_t, std::optional<std::uint64_t>, completion_ptr<>) override {}
  void exists(std::string, completion_ptr<std::optional<node_stat>>) override {}
  void get_data(std::string, completion_ptr<node_data>) override {}
  void set_data(std::string, std::string, std::int32_t, std::optional<std::uint64_t>, completion_ptr<node_stat>) override {}
  void get_children(std::string, completion_ptr<children>) override {}
  void sync(std::string, completion_ptr<>) override {}
  void multi(std::vector<multi_op>, std::optional<std::uint64_t>, completion_ptr<std::vector<op_result>>) override {}
  void wait_deleted(std::string, completion_ptr<>) override {}
  void wait_created(std::string, completion_ptr<>) override {}
  void wait_data_changed(std::string, std::int32_t, completion_ptr<event_type>) override {}
  void wait_children_changed(std::string, std::int32_t, completion_ptr<event_type>) override {}
  void add_auth(std::string, std::string, completion_ptr<>) override {}
  void confirm_contact(completion_ptr<>) override {}
  clock::duration contact_lag() const override { return {}; }
  void close(completion_ptr<>) override {}
  void abandon() override {}
};

session_ref ref_of(const std::shared_ptr<fake_core>& core) { return {core, core->generation()}; }

}  // namespace

TEST_CASE("known nodes: a walk down the nodes below mine, skipping those of sessions that are over") {
  asio::io_context io;
  auto mine_core = std::make_shared<fake_core>(io.get_executor());
  auto other_core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto n1 = parsed(node(uuid_a, "0000000001")), n2 = parsed(node(uuid_b, "0000000002")),
       n3 = parsed(node(uuid_c, "0000000003")), me = parsed(node(uuid_a, "0000000009"));
  known.add(n1, ref_of(other_core));
  known.add(n2, ref_of(mine_core));
  known.add(n3, ref_of(other_core));
  known.add(me, ref_of(mine_core));

  auto below = known.below(me);
  CHECK(below.what == known_nodes::below_result::node);
  CHECK(below.name == n3.name);
  // The other session is disconnected: its nodes may be gone without its knowing.
  other_core->set(session_state::suspended);
  CHECK(known.below(me).what == known_nodes::below_result::relist);
  // Its session is over: its nodes are gone, dropped without a round trip.
  other_core->next_generation();
  other_core->set(session_state::connected);
  below = known.below(me);
  CHECK(below.name == n2.name);
  CHECK(known.size() == 3);  // n3 dropped on the way; n1, below n2, not walked yet
  CHECK(known.owned_by(n2.name, ref_of(mine_core)));
  CHECK_FALSE(known.owned_by(n2.name, ref_of(other_core)));
  known.gone(n2.name);
  CHECK(known.below(me).what == known_nodes::below_result::first);
  // Closed: its nodes may live on (closed while disconnected, until the
  // server expires it): a waiter below them lists again; they stay known.
  mine_core->set(session_state::closed);
  CHECK(known.below(parsed(node(uuid_b, "0000000010"))).what == known_nodes::below_result::relist);
  CHECK(known.size() == 1);
  known.session_ended(ref_of(mine_core), false);
  CHECK(known.size() == 1);
  // Expired: its nodes are gone.
  known.session_ended(ref_of(mine_core), true);
  CHECK(known.size() == 0);
}

TEST_CASE("known nodes: a session whose object is gone says nothing of its nodes; the walk lists again, naming it") {
  // (Closed while disconnected, its nodes live until the server expires it.
  // Before, such an entry was dropped as gone, and a waiter below it granted.)
  asio::io_context io;
  auto mine_core = std::make_shared<fake_core>(io.get_executor());
  auto other_core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto n1 = parsed(node(uuid_b, "0000000001")), me = parsed(node(uuid_a, "0000000002"));
  known.add(n1, ref_of(other_core));
  known.add(me, ref_of(mine_core));
  other_core.reset();
  auto below = known.below(me);
  CHECK(below.what == known_nodes::below_result::relist);
  CHECK(below.name == n1.name);
  CHECK(known.size() == 2);
  known.gone(n1.name);  // a listing, or a watch, told
  CHECK(known.below(me).what == known_nodes::below_result::first);
}

TEST_CASE("known nodes: a reader's walk passes readers by, a writer's stops at them") {
  asio::io_context io;
  auto core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto w1 = parsed(writer(uuid_a, 1)), r2 = parsed(reader(uuid_b, 2)), r3 = parsed(reader(uuid_c, 3)),
       r4 = parsed(reader(uuid_a, 4)), w5 = parsed(writer(uuid_b, 5));
  for (auto& n : {w1, r2, r3, r4, w5}) known.add(n, ref_of(core));
  CHECK(known.below(r4).name == w1.name);
  CHECK(known.below(w5).name == r4.name);
  CHECK(known.below(r4, w1.name).what == known_nodes::below_result::first);  // exempt (a downgrade)
  known.gone(w1.name);
  CHECK(known.below(r4).what == known_nodes::below_result::first);
  // A reader not itself known: the walk still ends.
  auto r9 = parsed(reader(uuid_c, 9));
  known.gone(w5.name);
  CHECK(known.below(r9).what == known_nodes::below_result::first);
}

TEST_CASE("known nodes: a downgrade's read node beside its write node, at one sequence") {
  asio::io_context io;
  auto core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto w3 = parsed(writer(uuid_a, 3)), r3 = parsed(reader(uuid_b, 3)), w5 = parsed(writer(uuid_c, 5));
  known.add(w3, ref_of(core));
  known.add(w5, ref_of(core));
  known.add(r3, ref_of(core), w3.name);
  CHECK(known.size() == 3);
  CHECK(known.below(r3, w3.name).what == known_nodes::below_result::first);
  // A second downgrade of the same write node keeps the first.
  auto r3b = parsed(reader(uuid_c, 3));
  known.add(r3b, ref_of(core), w3.name);
  CHECK(known.size() == 4);
  known.gone(r3b.name);
  // The write lock released: the writer behind finds the read node.
  known.gone(w3.name);
  CHECK(known.below(w5).name == r3.name);
  // Another name at a known sequence, not beside it: an earlier incarnation's node, gone.
  auto other = parsed(writer(uuid_c, 3));
  known.add(other, ref_of(core));
  CHECK_FALSE(known.owned_by(r3.name, ref_of(core)));
  CHECK(known.below(w5).name == other.name);
}

TEST_CASE("known nodes: another recipe's nodes on the same path are no part of the walk") {
  asio::io_context io;
  auto core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto m1 = parsed(node_at(uuid_a, 1)), w2 = parsed(writer(uuid_b, 2)), l3 = parsed(node_at(uuid_c, 3, node_kind::lease)),
       w4 = parsed(writer(uuid_a, 4)), m5 = parsed(node_at(uuid_b, 5));
  for (auto& n : {m1, w2, l3, w4, m5}) known.add(n, ref_of(core));
  CHECK(known.below(w4).name == w2.name);
  known.gone(w2.name);
  CHECK(known.below(w4).what == known_nodes::below_result::first);  // not m1
  CHECK(known.below(m5).name == m1.name);                           // not w4, nor l3
}

TEST_CASE("known nodes: the walk goes round the counter's wrap") {
  asio::io_context io;
  auto core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto before_wrap = parsed(node_at(uuid_a, 2147483647)), after_wrap = parsed(node_at(uuid_b, -2147483648)),
       ahead = parsed(node_at(uuid_c, -2147483638));
  known.add(before_wrap, ref_of(core));
  known.add(ahead, ref_of(core));  // later than mine: never below it
  CHECK(known.below(after_wrap).name == before_wrap.name);
  known.gone(before_wrap.name);
  CHECK(known.below(after_wrap).what == known_nodes::below_result::first);
}

TEST_CASE("known nodes: waiting for a node to go, and withdrawing the wait") {
  asio::io_context io;
  auto core = std::make_shared<fake_core>(io.get_executor());
  known_nodes known;
  auto n1 = parsed(node(uuid_a, "0000000001")), n2 = parsed(node(uuid_b, "0000000002"));
  known.add(n1, ref_of(core));
  known.add(n2, ref_of(core));
  // Records the tokens it is told.
  struct recorder final : known_nodes::gone_waiter {
    std::vector<std::uint32_t> told;
    void node_gone(std::uint32_t token) override { told.push_back(token); }
  };
  auto first = std::make_shared<recorder>(), second = std::make_shared<recorder>();
  known.wait_gone(n1.name, first, 1);
  known.wait_gone(n2.name, second, 2);
  known.wait_gone(node(uuid_c, "0000000003"), first, 3);  // not known: at once
  CHECK(first->told == std::vector<std::uint32_t>{3});
  known.gone(n1.name);
  CHECK(first->told == std::vector<std::uint32_t>{3, 1});
  known.forget_wait(n2.name, second.get());
  known.gone(n2.name);  // the withdrawn wait is not told
  CHECK(second->told.empty());
  // The wait holds its waiter (nothing else may own a waiting acquire) until
  // it is told, or withdrawn.
  auto n4 = parsed(node(uuid_a, "0000000004"));
  known.add(n4, ref_of(core));
  auto held = std::make_shared<recorder>();
  std::weak_ptr<recorder> watched = held;
  known.wait_gone(n4.name, std::exchange(held, nullptr), 4);
  REQUIRE_FALSE(watched.expired());
  CHECK(watched.lock()->told.empty());
  known.gone(n4.name);
  CHECK(watched.expired());
  auto n5 = parsed(node(uuid_a, "0000000005"));
  known.add(n5, ref_of(core));
  held = std::make_shared<recorder>();
  watched = held;
  known.wait_gone(n5.name, held, 5);
  known.forget_wait(n5.name, std::exchange(held, nullptr).get());
  CHECK(watched.expired());
  known.gone(n5.name);

  // The session ends: every local wait on its nodes ends with it.
  auto n3 = parsed(node(uuid_c, "0000000003"));
  known.add(n3, ref_of(core));
  known.wait_gone(n3.name, second, 5);
  known.session_ended(ref_of(core), false);
  CHECK(second->told == std::vector<std::uint32_t>{5});
  CHECK(known.size() == 1);  // closed, not expired: the node may still be there
}

TEST_CASE("local handoff's rule: hand over while the node is sure and the bound allows, from another's sight on") {
  using zkasio::detail::after_release;
  using zkasio::detail::local_run_budget;
  using namespace std::chrono_literals;
  auto now = std::chrono::steady_clock::now();
  auto next = [&](local_run_budget budget, bool waiting = true, bool sure = true) {
    return mutex_queue.next_after_release(budget, 2, 10ms, waiting, sure, now);
  };
  // Nobody else seen: unbounded.
  CHECK(next({}) == after_release::hand_off);
  CHECK(next({.other_seen = std::nullopt, .handed_since = 1000}) == after_release::hand_off);
  // Nobody waiting here, or the node not sure (lost, or the session unsure): the node goes.
  CHECK(next({}, false) == after_release::delete_node);
  CHECK(next({}, true, false) == after_release::delete_node);
  // Another contender seen: max_run more, within max_time.
  CHECK(next({.other_seen = now, .handed_since = 0}) == after_release::hand_off);
  CHECK(next({.other_seen = now, .handed_since = 1}) == after_release::hand_off);
  CHECK(next({.other_seen = now, .handed_since = 2}) == after_release::delete_node);
  CHECK(next({.other_seen = now - 9ms, .handed_since = 0}) == after_release::hand_off);
  CHECK(next({.other_seen = now - 10ms, .handed_since = 0}) == after_release::delete_node);
  // max_run 0 or max_time 0: none once another is seen.
  CHECK(mutex_queue.next_after_release({.other_seen = now, .handed_since = 0}, 0, 1h, true, true, now) == after_release::delete_node);
  CHECK(mutex_queue.next_after_release({.other_seen = now, .handed_since = 0}, 5, 0ms, true, true, now) == after_release::delete_node);
}

TEST_CASE("a node of the user's own recipe may be held only if it is an EPHEMERAL node of this session") {
  using zkasio::detail::own_node_refusal;
  const std::int64_t mine = 0x1234, theirs = 0x5678;
  CHECK(own_node_refusal(zkasio::node_stat{.ephemeral_owner = mine}, mine) == zkasio::error_code{});
  CHECK(own_node_refusal(std::nullopt, mine) == zkasio::zk_error::no_node);
  CHECK(own_node_refusal(zkasio::node_stat{.ephemeral_owner = 0}, mine) == zkasio::error::not_own_node);
  CHECK(own_node_refusal(zkasio::node_stat{.ephemeral_owner = theirs}, mine) == zkasio::error::not_own_node);
  CHECK(own_node_refusal(zkasio::node_stat{.ephemeral_owner = 0}, 0) == zkasio::error::not_own_node);
}
