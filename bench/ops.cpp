// The same operations as the floor, through zkasio::session, from coroutines
// on one thread.
#include <unistd.h>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <zkasio/session.hpp>

#include "latency.hpp"
#include "harness.hpp"

namespace zkasio::bench {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;

awaitable<void> measure(session& a, session& b, const options& o, report& r) {
  co_await a.async_connect(use_awaitable);
  co_await b.async_connect(use_awaitable);
  const std::string dir = "/zkasio-bench-ops-" + std::to_string(getpid());
  co_await a.async_create(dir, "", use_awaitable);
  operation_latencies ops(r);
  const create_options ephemeral(create_mode::ephemeral);
  for (int i = 0; i < o.rounds; ++i) {
    auto path = dir + "/n" + std::to_string(i);
    auto t0 = clock::now();
    co_await a.async_create(path, "", use_awaitable);
    ops.create.add(clock::now() - t0);

    t0 = clock::now();
    co_await a.async_get_children(dir, use_awaitable);
    ops.get_children.add(clock::now() - t0);

    t0 = clock::now();
    co_await a.async_exists(path, use_awaitable);
    ops.exists.add(clock::now() - t0);

    // notify: b waits for the deletion (its watch set first), a deletes; from
    // a's submit to b's handler. The timer is the event the handler signals.
    clock::time_point seen;
    asio::steady_timer signalled(a.get_executor(), asio::steady_timer::time_point::max());
    b.async_wait_deleted(path, [&](zkasio::error_code) {
      seen = clock::now();
      signalled.cancel();
    });
    co_await b.async_exists(path, use_awaitable);  // requests run in order: the watch is set
    t0 = clock::now();
    a.async_remove(path, [](zkasio::error_code) {});
    zkasio::error_code ignored;
    co_await signalled.async_wait(asio::redirect_error(use_awaitable, ignored));
    ops.notify.add(seen - t0);

    co_await a.async_create(path, "", use_awaitable);
    t0 = clock::now();
    co_await a.async_remove(path, use_awaitable);
    ops.remove.add(clock::now() - t0);

    t0 = clock::now();
    co_await (a.async_create(path, "", ephemeral, use_awaitable) &&
              a.async_get_children(dir, use_awaitable));
    ops.pipelined.add(clock::now() - t0);
    co_await a.async_remove(path, use_awaitable);
  }
  co_await a.async_remove(dir, use_awaitable);
  co_await a.async_close(use_awaitable);
  co_await b.async_close(use_awaitable);
}

}  // namespace

report run_ops(const options& o) {
  return run_with_sessions(o, 2, "ops", [](session_list& both, const options& o, report& r) {
    return measure(*both[0], *both[1], o, r);
  });
}

}  // namespace zkasio::bench
