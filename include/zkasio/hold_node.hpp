// zkasio::async_hold_node: a recipe of the user's own ends in a zkasio::lock.
//
// A recipe zkasio does not have (its own node names, its own order) decides
// by itself when it holds; its node is then held as every zkasio lock's is.
// Given the full path of an EPHEMERAL node its session created, the
// operation checks (after a sync, so the answer is the leader's) that the
// node is there and this session's, and completes with a `lock` on it:
// - its lost signal (lock.hpp) fires when the node is deleted, its data is
//   set to Curator's "__REVOKE__", the session ends, or, under the options'
//   `policy` and `safety_margin`, the lock may be lost (the same monitor as
//   a mutex holder's);
// - fencing_token() is {the node's czxid, 0};
// - async_release (and the lock's end) deletes the node: that incarnation
//   of it only (its czxid), and only while this session owns it;
// - with_hold runs a body under it.
// async_guarded_multi fails with not_fenced, as a race recipe's lock does:
// the node's path may be made again, with the same versions, by another.
// Of lock_options, `policy`, `safety_margin` and `observer` apply (the
// observer hears granted, with no wait, lost and released); `data`, `node_acl`
// and `requeue_on_expiry` do not (nothing is created, nothing waits).
// For a node whose life is its session's (presence), lost_policy::on_expiry
// (lost only when the session is over or the node deleted, never during a
// disconnection) and lock::async_leave (the hold ends, the node stays the
// session's); the lock recipes refuse on_expiry.
//
//   async_hold_node(session, node, [options])   void(error_code, lock)
//
// The node's path is, in this session, the hold's alone while it lasts: it
// takes the session's turn on the path as a race_mutex's (or a race-mode
// election's) contender does, so such a contender of the session there, or
// a second hold of the node, waits for it (lock_busy while one has it).
// Hold no node a zkasio recipe made (a mutex's contender node): that
// recipe's own hold of it would not know of this one.
// The release checks that the node is this incarnation, then deletes it: a
// delete and a create at the path between the two (by another session, or
// by the user's recipe) would be deleted in its place, as for race_mutex.
//
// Errors: invalid_path (the root, or a path ZooKeeper rejects); no_node;
// not_own_node (a persistent node, or another session's); lock_busy (above);
// session_expired (the session ended during the check);
// invalid_safety_margin; the session's own errors (it waits for the
// connection, as every request does; a connection lost during its sync is
// connection_loss: the check is not asked again).
// Cancellation: terminal and partial complete it at once with
// operation_aborted, and the node is left as it was (never deleted: it is
// the caller's until a lock holds it); total is not honoured.
#pragma once

#include <asio/async_result.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <zkasio/detail/lock_engine.hpp>
#include <zkasio/error_code.hpp>
#include <zkasio/lock.hpp>
#include <zkasio/session.hpp>

namespace zkasio {

// The session must outlive the lock.
template <class Token = default_token>
  requires detail::token_not<Token, lock_options>  // options are the other overload's
auto async_hold_node(session& s, std::string_view node, Token&& token = {}) {
  return async_hold_node(s, node, lock_options{}, std::forward<Token>(token));
}
template <class Token = default_token>
auto async_hold_node(session& s, std::string_view node, lock_options options, Token&& token = {}) {
  return asio::async_initiate<Token, void(error_code, lock)>(
      [](auto handler, session* s, std::string node, lock_options options) {
        auto strand = detail::make_strand_over(s->get_executor());
        auto done = detail::engine_completion<lock, lock>(std::move(handler), strand);
        detail::start_hold_node(*s, std::move(node), std::move(options), strand, std::move(done));
      },
      token, &s, std::string(node), std::move(options));
}

}  // namespace zkasio
