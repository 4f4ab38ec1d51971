// Must not compile with -Werror: a lock discarded is released at once, so
// zkasio::lock is [[nodiscard]] (test_discarded_lock_warns).
#include <asio/use_future.hpp>
#include <zkasio/mutex.hpp>

void discard(zkasio::mutex& m) { m.async_acquire(asio::use_future).get(); }
