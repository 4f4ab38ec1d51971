#include "c_types.hpp"

namespace zkasio::detail {

node_stat to_stat(const Stat* s) {
  if (!s) return {};
  return {.czxid = s->czxid,
          .mzxid = s->mzxid,
          .pzxid = s->pzxid,
          .ctime = s->ctime,
          .mtime = s->mtime,
          .version = s->version,
          .cversion = s->cversion,
          .aversion = s->aversion,
          .ephemeral_owner = s->ephemeralOwner,
          .data_length = s->dataLength,
          .num_children = s->numChildren};
}

// (A failed reconnection completes the queued requests with ZSYSTEMERROR, a
// reply out of order with ZRUNTIMEINCONSISTENCY; ZTHROTTLEDOP is a refusal
// given before the request was handled, so not through the leader, and with
// no results.)
bool unanswered(int rc) {
  return rc != ZOK && (rc > ZAPIERROR || rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZAUTHFAILED ||
                       rc == ZNOTHING || rc == ZINVALIDCALLBACK || rc == ZNOWATCHER || rc == ZTHROTTLEDOP) &&
         rc != ZBADARGUMENTS && rc != ZUNIMPLEMENTED;
}

bool lost_in_transit(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSYSTEMERROR || rc == ZRUNTIMEINCONSISTENCY;
}

c_acl::c_acl(const acl& source) {
  for (const auto& e : source)
    entries.push_back({e.perms, {const_cast<char*>(e.scheme.c_str()), const_cast<char*>(e.id.c_str())}});
  vector = {static_cast<std::int32_t>(entries.size()), entries.data()};
}

int c_mode(create_mode mode) {
  switch (mode) {
    case create_mode::persistent: return ZOO_PERSISTENT;
    case create_mode::ephemeral: return ZOO_EPHEMERAL;
    case create_mode::persistent_sequential: return ZOO_PERSISTENT_SEQUENTIAL;
    case create_mode::ephemeral_sequential: return ZOO_EPHEMERAL_SEQUENTIAL;
    case create_mode::container: return ZOO_CONTAINER;
  }
  return ZOO_PERSISTENT;
}

bool sequential(create_mode mode) {
  return mode == create_mode::persistent_sequential || mode == create_mode::ephemeral_sequential;
}

}  // namespace zkasio::detail
