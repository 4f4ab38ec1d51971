#include "client_pump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>

#include <asio/bind_executor.hpp>
#include <asio/post.hpp>
#include <zkasio/error_code.hpp>

#include "c_client_scope.hpp"

namespace zkasio::detail {
namespace {

// Readiness the C client is interested in, right now, without waiting.
int ready_now(int fd, int interest) {
  pollfd p{fd, 0, 0};
  if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
  if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
  if (::poll(&p, 1, 0) != 1) return 0;
  int events = 0;
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
  if (p.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
  return events;
}

// zookeeper_process reads at most one reply per call: bound the rounds of one
// poke so a flood of replies cannot starve the executor.
constexpr int max_rounds = 64;

// When zookeeper_interest fails without saying what it waits for (a failed
// host name resolution), ask again after this long.
constexpr timeval retry_after_failure{0, 100'000};

}  // namespace

client_pump::client_pump(const strand_type& strand, const session_options* options,
                         std::function<void()> on_unrecoverable, std::function<void()> on_disconnected)
    : options_(options),
      on_unrecoverable_(std::move(on_unrecoverable)),
      on_disconnected_(std::move(on_disconnected)),
      socket_(strand),
      timer_(strand) {}

void client_pump::attach(zhandle_t* zh, std::shared_ptr<void> keep_alive) {
  zh_ = zh;
  keep_alive_ = std::move(keep_alive);
  poke();
}

void client_pump::detach() {
  watch_socket(-1);
  checked_while_connected_ = false;
  was_connected_ = false;
  timer_.cancel();
  timer_armed_ = false;
  zh_ = nullptr;
  keep_alive_.reset();
}

bool client_pump::watch_socket(int fd) {
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) != 0) fd = -1;
  bool same = fd == seen_fd_ && (fd < 0 || (st.st_dev == seen_dev_ && st.st_ino == seen_ino_));
  if (same && (fd < 0 || fd_ >= 0)) return false;  // the same socket, watched
  seen_fd_ = fd;
  seen_dev_ = st.st_dev;
  seen_ino_ = st.st_ino;
  // Cancels the waits (their handlers see an old epoch) and closes our duplicate.
  error_code ignored;
  socket_.close(ignored);
  ++epoch_;
  read_armed_ = write_armed_ = false;
  fd_ = fd;
  if (fd >= 0) {
    int duplicate = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    error_code ec;
    if (duplicate >= 0) socket_.assign(duplicate, ec);
    if (duplicate < 0 || ec) {
      // Out of descriptors: the timer keeps the client going, and the next
      // round tries again (the socket is still the one seen).
      if (duplicate >= 0) ::close(duplicate);
      fd_ = -1;
    }
  }
  return !same;
}

void client_pump::poke() { pump(true); }
void client_pump::flush() { pump(false); }

void client_pump::pump(bool process_replies) {
  if (!zh_) return;
  if (pumping_) {  // from a C callback inside zookeeper_process: the loop below goes round again
    poke_again_ = true;
    return;
  }
  pumping_ = true;
  c_client_scope scope(options_);
  int rounds = 0;
  do {
    poke_again_ = false;
    constexpr int unset = -2;
    int fd = unset, interest = 0;
    timeval tv{};
    // This call may open a socket and send the handshake on it.
    auto round_started = std::chrono::steady_clock::now();
    int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    if (rc == ZINVALIDSTATE) {
      pumping_ = false;
      detach();
      on_unrecoverable_();
      return;
    }
    if (fd == unset) {
      // It failed before looking at the connection: keep watching as before.
      arm(0, retry_after_failure);
      break;
    }
    look_at_connection();
    // A new socket only comes while the client is not connected (its
    // handshake not yet answered): while it stays connected on the same
    // descriptor number, no fstat is needed to know the socket is the same.
    bool connected = zoo_state(zh_) == ZOO_CONNECTED_STATE;
    if ((fd != fd_ || !connected || !checked_while_connected_) && watch_socket(fd))
      socket_seen_ = round_started;
    checked_while_connected_ = connected;
    // Arm first, then look: readiness that came before the wait was armed is
    // seen by the look, readiness after it wakes the wait (a spare wake-up
    // costs one empty round; a missed one would hang).
    arm(fd_ >= 0 ? interest : 0, tv);
    if (!process_replies) break;
    if (int events = fd_ >= 0 ? ready_now(fd_, interest) : 0) {
      zookeeper_process(zh_, events);
      if (!zh_) break;  // detached from a callback
      look_at_connection();
      if (!zh_) break;
      poke_again_ = true;
    }
  } while (poke_again_ && ++rounds < max_rounds);
  pumping_ = false;
  if (poke_again_ && zh_) {
    asio::post(timer_.get_executor(), [this, keep = keep_alive_.lock()] { poke(); });
  }
}

void client_pump::look_at_connection() {
  int state = zoo_state(zh_);
  bool connected = state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE;
  if (std::exchange(was_connected_, connected) && !connected) on_disconnected_();
}

void client_pump::wait_for(asio::posix::stream_descriptor::wait_type type, bool& armed) {
  if (armed) return;
  armed = true;
  socket_.async_wait(type, [this, &armed, epoch = epoch_, keep = keep_alive_.lock()](error_code ec) {
    if (epoch != epoch_ || ec == asio::error::operation_aborted) return;
    armed = false;
    poke();
  });
}

void client_pump::arm(int interest, const timeval& tv) {
  if (interest & ZOOKEEPER_READ) wait_for(asio::posix::stream_descriptor::wait_read, read_armed_);
  if (interest & ZOOKEEPER_WRITE) wait_for(asio::posix::stream_descriptor::wait_write, write_armed_);
  // The C client wants to be called again within tv (pings, connect timeouts,
  // reconnect back-off). A timer that would fire earlier is kept: firing early
  // only means one more poke.
  auto deadline = asio::steady_timer::clock_type::now() + std::chrono::seconds(tv.tv_sec) +
                  std::chrono::microseconds(tv.tv_usec);
  if (timer_armed_ && timer_deadline_ <= deadline) return;
  timer_armed_ = true;
  timer_deadline_ = deadline;
  timer_.expires_at(deadline);
  timer_.async_wait([this, keep = keep_alive_.lock()](error_code ec) {
    if (ec == asio::error::operation_aborted) return;  // re-armed or detached
    timer_armed_ = false;
    poke();
  });
}

}  // namespace zkasio::detail
