// Between the C client's types and codes and zkasio's: stats, ACLs, create
// modes, and what a reply code says about the server's answer.
#pragma once

#include <zookeeper/zookeeper.h>

#include <array>
#include <vector>
#include <zkasio/operations.hpp>

namespace zkasio::detail {

node_stat to_stat(const Stat* s);

// The request got no answer from the server (whatever the C client says
// went wrong on its side), or only the refusal of a busy server: nothing
// the server did with the session.
bool unanswered(int rc);
// The request got no answer from the server but may be sent again: the
// connection was lost (or the C client failed on its side) before it came.
bool lost_in_transit(int rc);

// ACLs in the C client's shape; the strings stay owned by `source`.
struct c_acl {
  explicit c_acl(const acl& source);
  c_acl(const c_acl&) = delete;  // (`vector` points into it)
  c_acl& operator=(const c_acl&) = delete;
  ACL_vector vector{};

 private:
  std::array<ACL, 2> few_{};  // the usual ACL's entries: no allocation per create
  std::vector<ACL> more_;     // a longer ACL's
};

int c_mode(create_mode mode);
bool sequential(create_mode mode);

}  // namespace zkasio::detail
