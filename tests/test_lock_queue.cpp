// The lock's decisions without a server: names, ordering, verdicts.
#include <doctest/doctest.h>

#include <set>
#include <vector>
#include <zkasio/detail/lock_queue.hpp>

using namespace zkasio::detail;

namespace {
const std::string uuid_a = "0f8fad5b-d9cb-469f-a165-70867728950e";
const std::string uuid_b = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const std::string uuid_c = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
std::string node(const std::string& uuid, const std::string& sequence) {
  return lock_node_prefix(uuid) + sequence;
}
lock_node parsed(const std::string& name) { return *parse_lock_node(name); }
}  // namespace

TEST_CASE("lock node names are Curator's protected names") {
  CHECK(lock_node_prefix(uuid_a) == "_c_" + uuid_a + "-lock-");
  auto parsed = parse_lock_node(node(uuid_a, "0000000042"));
  REQUIRE(parsed.has_value());
  CHECK(parsed->uuid == uuid_a);
  CHECK(parsed->sequence == 42);
  // A wrapped counter: printf("%010d") of a negative number.
  CHECK(parse_lock_node(node(uuid_a, "-000000007"))->sequence == -7);

  const std::vector<std::string> bad_names{"", "lock-0000000001", "_c_" + uuid_a + "-lock-", node(uuid_a, "00000001"),
                          node(uuid_a, "00000000012"), node(uuid_a, "00000x0001"),
                          "_c_" + uuid_a + "-read-0000000001", "_c_not-a-uuid-at-all-0000-000000000000-lock-0000000001",
                          "_x_" + uuid_a + "-lock-0000000001", "garbage\n\x01"};
  for (const auto& bad : bad_names) {
    CAPTURE(bad);
    CHECK_FALSE(parse_lock_node(bad).has_value());
  }
}

TEST_CASE("make_uuid gives distinct version-4 UUIDs that parse back") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto u = make_uuid();
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
  CHECK(queue[0].uuid == uuid_b);
  CHECK(queue[1].uuid == uuid_c);
  CHECK(queue[2].uuid == uuid_a);
}

TEST_CASE("verdicts: first holds, others wait for their immediate predecessor only") {
  auto a = node(uuid_a, "0000000001"), b = node(uuid_b, "0000000002"), c = node(uuid_c, "0000000003");
  auto queue = make_view(lock_queue({c, a, b}), {});
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
  CHECK(decide(make_view({}, {}), parsed(a)).what == lock_verdict::missing);
  // Same sequence, another name (the parent was re-created): not mine.
  CHECK(decide(queue, parsed(node(uuid_c, "0000000001"))).what == lock_verdict::missing);
}

TEST_CASE("own nodes below the predecessor need no new listing") {
  auto a = node(uuid_a, "0000000001"), b = node(uuid_b, "0000000002"), c = node(uuid_c, "0000000003"),
       d = node(uuid_a, "0000000004");
  own_nodes own{{1, a}, {2, b}, {4, d}};  // c is another session's
  auto queue = make_view(lock_queue({d, c, b, a}), own);
  CHECK(queue.others_before == std::vector<std::uint32_t>{0, 0, 0, 1});

  auto vc = decide(queue, parsed(c));
  CHECK(vc.predecessor == b);
  CHECK_FALSE(vc.relist_after);  // only own nodes (a) below b
  auto vd = decide(queue, parsed(d));
  CHECK(vd.predecessor == c);
  CHECK_FALSE(vd.relist_after);

  // A node named like an own one but with another sequence is someone else's.
  auto stale = make_view(lock_queue({a, b}), own_nodes{{1, node(uuid_b, "0000000001")}});
  CHECK(stale.others_before == std::vector<std::uint32_t>{0, 1});
}

TEST_CASE("after the predecessor went: the own node still below, or first") {
  auto a = node(uuid_a, "0000000001"), b = node(uuid_b, "0000000005");
  own_nodes own{{1, a}, {5, b}, {9, node(uuid_c, "0000000009")}};
  CHECK(next_own_predecessor(own, 7) == b);
  CHECK(next_own_predecessor(own, 5) == a);  // mine (5) is not its own predecessor
  own.erase(1);
  CHECK_FALSE(next_own_predecessor(own, 5));
  CHECK_FALSE(next_own_predecessor({}, 5));
}

TEST_CASE("finding a node by its uuid after a lost create reply") {
  std::vector<std::string> children{node(uuid_b, "0000000002"), "other", node(uuid_a, "0000000005")};
  auto found = find_by_uuid(children, uuid_a);
  REQUIRE(found.has_value());
  CHECK(found->name == node(uuid_a, "0000000005"));
  CHECK_FALSE(find_by_uuid(children, uuid_c).has_value());
}
