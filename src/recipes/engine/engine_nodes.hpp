// A contender's node (engine_nodes.cpp): created with its parents, listed,
// found again after a lost reply, deleted (never another session's).
#pragma once

#include <zkasio/error_code.hpp>

#include "recipes/engine/engine.hpp"
#include "recipes/machines/node_removal.hpp"

namespace zkasio::detail {

// The listing of the lock's children that the contenders asking now share,
// sent after every request submitted so far (its `ready` set once answered).
std::shared_ptr<listing_round> next_listing(const std::shared_ptr<engine_state>& m);
// The same, awaited.
awaitable<listing> fresh_listing(std::shared_ptr<engine_state> m);
// After a request failed with `ec` (retryable; or none yet): once it may be
// asked again (connected; after a busy answer, a pause first).
awaitable<error_code> until_retry(std::shared_ptr<engine_state> m, error_code ec);
// Removes `name` (the race recipes' node when empty), the node `t`, as
// node_removal decides (src/recipes/machines/node_removal.hpp: never
// another session's node, never sent in another session): success, or
// lock_lost when it was gone already or went with its session. `name` is
// viewed, not copied: its owner (the hold, the attempt in the caller's
// frame, or a literal) outlives the removal.
awaitable<error_code> remove_node(std::shared_ptr<engine_state> m, std::string_view name, node_removal::target t);
// The same for a node known to be made: of the ephemeral owner `owner_id`,
// in the session's `generation`, the incarnation `czxid` if known.
awaitable<error_code> delete_node(std::shared_ptr<engine_state> m, std::string_view name, std::int64_t owner_id,
                                  std::uint64_t generation, std::int64_t czxid = 0);
attempt fresh_attempt(const engine_state& m, const acquire_request& request);
// The node of its own owner that does not block an attempt (a downgrade's).
std::string_view exempt(const attempt& a);
// The ACL of the nodes the engine creates.
acl node_acl(const engine_state& m);
// Creates `path` and its parents when missing, as containers, in the
// session's `generation` (session_expired once it has ended).
awaitable<error_code> create_parents(engine_state& m, const std::string& path, std::uint64_t generation);
// Whether the acquire rides through `ec`: the connection lost or the server
// busy, in the attempt's session.
bool ride_through(error_code ec, const session& s, const attempt& a);
// Makes `path` and its parents for `a`, whose create found none.
awaitable<error_code> make_parents(std::shared_ptr<engine_state> m, std::string path, const attempt& a);
// Deletes a failed or cancelled attempt's node if its create took effect.
awaitable<error_code> remove_attempt_node(std::shared_ptr<engine_state> m, attempt a);
// The path's parent and the node's name in it.
std::pair<std::string, std::string> split_path(const std::string& path);

}  // namespace zkasio::detail
