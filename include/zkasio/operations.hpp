// What ZooKeeper operations take and return: paths, node metadata, create
// modes, ACLs, multi-operations and watch events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>
#include <zkasio/error_code.hpp>

namespace zkasio {

// Matches any version in remove, set_data and check.
inline constexpr std::int32_t any_version = -1;

// A node's metadata (ZooKeeper's Stat).
struct node_stat {
  std::int64_t czxid = 0;            // zxid of the create; orders grants, survives parent re-creation
  std::int64_t mzxid = 0;            // zxid of the last data change
  std::int64_t pzxid = 0;            // zxid of the last child change
  std::int64_t ctime = 0;            // ms since the epoch
  std::int64_t mtime = 0;
  std::int32_t version = 0;          // data version
  std::int32_t cversion = 0;         // children version
  std::int32_t aversion = 0;         // ACL version
  std::int64_t ephemeral_owner = 0;  // session id of an ephemeral node's owner, else 0
  std::int32_t data_length = 0;
  std::int32_t num_children = 0;
  bool operator==(const node_stat&) const = default;
};

enum class create_mode {
  persistent,
  ephemeral,  // deleted when the creating session ends
  persistent_sequential,
  ephemeral_sequential,
  container,  // deleted by the server once it has had children and has none left
};

// ACL permissions, as bits.
namespace perm {
inline constexpr std::int32_t read = 1, write = 2, create = 4, remove = 8, admin = 16,
                              all = 31;
}

struct acl_entry {
  std::int32_t perms = perm::all;
  std::string scheme;  // "world", "auth", "digest", "ip", ...
  std::string id;
  bool operator==(const acl_entry&) const = default;
};
using acl = std::vector<acl_entry>;

acl open_acl_unsafe();  // world:anyone, all permissions (ZooKeeper's default)
acl read_acl_unsafe();  // world:anyone, read only
acl creator_all_acl();  // auth: all permissions for the authenticated creator
// auth: all permissions for the authenticated creator, world:anyone: read.
acl creator_all_world_read_acl();

struct create_options {
  // A constructor, not an aggregate: g++ 12 destroys an aggregate temporary
  // with default member initializers twice when it is an argument in a
  // co_await expression, as in `co_await s.async_create(p, d, {mode}, ...)`.
  create_options(create_mode mode = create_mode::persistent, acl access = open_acl_unsafe())
      : mode(mode), access(std::move(access)) {}
  create_mode mode;
  acl access;
};

// Results.
struct created {
  std::string path;  // the actual path (with the sequence suffix for sequential modes)
  node_stat stat;
};
struct node_data {
  std::string data;
  node_stat stat;
};
struct children {
  std::vector<std::string> names;  // in the server's order (unsorted)
  node_stat stat;               // of the parent
};

// Multi-operations: all succeed or none is applied.
namespace op {
struct check {
  std::string path;
  std::int32_t version = any_version;
};
struct create {
  std::string path;
  std::string data;
  create_options options{};
};
struct remove {
  std::string path;
  std::int32_t version = any_version;
};
struct set_data {
  std::string path;
  std::string data;
  std::int32_t version = any_version;
};
}  // namespace op
using multi_op = std::variant<op::check, op::create, op::remove, op::set_data>;

// One result per operation of a multi, in order. When the multi failed, the
// operation that caused it carries its error and the others a generic one
// (ZooKeeper reports ok or runtime_inconsistency for them).
struct op_result {
  error_code error;
  std::string path;   // op::create: the created path
  node_stat stat;  // op::set_data: the node's new stat
};

// Watches.
enum class event_type { created, deleted, data_changed, children_changed };

// Path checks, done before any request is sent.
inline constexpr std::size_t max_path_length = 4096;
// Empty when `path` is valid, else why it is not, naming the path. Sequential
// creates may end in '/': the server appends the sequence number.
std::string path_problem(std::string_view path, bool sequential = false);

}  // namespace zkasio
