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
  auto entry = [](const acl_entry& e) {
    return ACL{e.perms, {const_cast<char*>(e.scheme.c_str()), const_cast<char*>(e.id.c_str())}};
  };
  ACL* entries = few_.data();
  if (source.size() > few_.size()) {
    more_.resize(source.size());
    entries = more_.data();
  }
  for (std::size_t i = 0; i < source.size(); ++i) entries[i] = entry(source[i]);
  vector = {static_cast<std::int32_t>(source.size()), entries};
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
