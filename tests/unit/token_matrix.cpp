// Every operation of the public API instantiated with every kind of
// completion token: compiled, never run (test_lock_tokens runs its tests; the
// integration tests run the operations). A token an operation cannot take,
// or an operation whose outcomes differ in type, fails to compile. Part of
// test_lock_tokens in the stages that check compilation (the default and
// Boost.Asio ones), not in the sanitizers' (tests/CMakeLists.txt), where
// nothing of it runs.
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <optional>
#include <tuple>
#include <zkasio/election.hpp>
#include <zkasio/hold_node.hpp>
#include <zkasio/mutex.hpp>
#include <zkasio/race_mutex.hpp>
#include <zkasio/semaphore.hpp>
#include <zkasio/shared_mutex.hpp>

namespace {

// Every operation of the public API with every kind of completion token:
// instantiated here (compiled, never run; the run tests are below and in
// the integration tests). A token an operation cannot take, or an
// operation whose outcomes differ in type, fails to compile.
template <class Token>
void every_operation(zkasio::session& s, zkasio::mutex& m, zkasio::race_mutex& race, zkasio::shared_mutex& rw,
                     zkasio::semaphore& sem, zkasio::election& e, zkasio::lock& held, zkasio::leadership& leading,
                     const zkasio::owner& me, Token token) {
  using namespace std::chrono_literals;
  auto deadline = std::chrono::steady_clock::now() + 1s;
  (void)s.async_connect(token);
  (void)s.async_wait_state_change(zkasio::session_state::connecting, token);
  (void)s.async_create("/a", "", token);
  (void)s.async_create("/a", "", zkasio::create_options{}, token);
  (void)s.async_remove("/a", token);
  (void)s.async_remove("/a", 0, token);
  (void)s.async_exists("/a", token);
  (void)s.async_get_data("/a", token);
  (void)s.async_set_data("/a", "", token);
  (void)s.async_set_data("/a", "", 0, token);
  (void)s.async_get_children("/a", token);
  (void)s.async_sync("/a", token);
  (void)s.async_multi({}, token);
  (void)s.async_wait_deleted("/a", token);
  (void)s.async_wait_created("/a", token);
  (void)s.async_wait_data_changed("/a", token);
  (void)s.async_wait_data_changed("/a", 0, token);
  (void)s.async_wait_children_changed("/a", token);
  (void)s.async_wait_children_changed("/a", 0, token);
  (void)s.async_add_auth("digest", "a:b", token);
  (void)s.async_confirm_contact(token);
  auto pinned = s.pinned();
  (void)pinned.async_create("/a", "", token);
  (void)pinned.async_remove("/a", token);
  (void)pinned.async_set_data("/a", "", token);
  (void)pinned.async_multi({}, token);
  (void)s.async_close(token);
  // The exclusive acquires, one vocabulary on every lock that has them.
  auto exclusive_acquires = [&](auto& exclusive) {
    (void)exclusive.async_acquire(token);
    (void)exclusive.async_acquire({.who = me}, token);
    (void)exclusive.async_acquire({.who = me, .deadline = deadline, .timeout = 1s}, token);
    (void)exclusive.async_try_acquire(token);
    (void)exclusive.async_acquire_until(deadline, token);
    (void)exclusive.async_acquire_for(1s, token);
  };
  exclusive_acquires(m);
  (void)m.async_contenders(token);
  (void)m.async_revoke("/a/b", token);
  exclusive_acquires(race);
  (void)race.async_holder(token);
  exclusive_acquires(rw);
  (void)rw.async_acquire_shared(token);
  (void)rw.async_acquire_shared({.who = me}, token);
  (void)rw.async_acquire_shared({.who = me, .timeout = 1s}, token);
  (void)rw.async_try_acquire_shared(token);
  (void)rw.async_acquire_shared_until(deadline, token);
  (void)rw.async_acquire_shared_for(1s, token);
  (void)sem.async_acquire(token);
  (void)sem.async_try_acquire(token);
  (void)sem.async_acquire_until(deadline, token);
  (void)sem.async_acquire_for(1s, token);
  (void)sem.async_acquire_many(2, token);
  (void)sem.async_acquire_many_until(2, deadline, token);
  (void)e.async_campaign("d", token);
  (void)e.async_campaign_until("d", deadline, token);
  (void)e.async_campaign_for("d", 1s, token);
  (void)e.async_leader(token);
  (void)e.async_leader_changed(std::nullopt, token);
  (void)held.async_wait_lost(token);
  (void)held.async_release(token);
  (void)held.async_guarded_multi({}, token);
  (void)held.async_leave(token);
  (void)zkasio::async_hold_node(s, "/a", token);
  (void)zkasio::async_hold_node(s, "/a", zkasio::lock_options{}, token);
  (void)leading.async_resign(token);
}
// A callback that takes whatever an operation completes with.
struct any_callback {
  template <class... Values>
  void operator()(zkasio::error_code, Values&&...) const {}
};
using matrix_executor = asio::strand<asio::io_context::executor_type>;
using executor_bound = asio::executor_binder<any_callback, matrix_executor>;
using slot_bound = asio::cancellation_slot_binder<any_callback, asio::cancellation_slot>;
// (Taking each one's address instantiates it.)
[[maybe_unused]] const auto every_token = std::make_tuple(
    &every_operation<asio::use_awaitable_t<>>, &every_operation<asio::use_awaitable_t<matrix_executor>>,
    &every_operation<asio::experimental::deferred_t>, &every_operation<asio::use_future_t<>>,
    &every_operation<asio::experimental::as_tuple_t<asio::use_awaitable_t<>>>,
    &every_operation<asio::redirect_error_t<asio::use_awaitable_t<>>>, &every_operation<any_callback>,
    &every_operation<executor_bound>, &every_operation<slot_bound>);

}  // namespace
