#include "client_pump.hpp"

#include <poll.h>
#include <sys/stat.h>

#include <asio/bind_executor.hpp>
#include <asio/post.hpp>

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

}  // namespace

client_pump::client_pump(const strand_type& strand, std::function<void()> on_unrecoverable)
    : on_unrecoverable_(std::move(on_unrecoverable)), socket_(strand), timer_(strand) {}

void client_pump::attach(zhandle_t* zh, std::shared_ptr<void> keep_alive) {
  zh_ = zh;
  keep_alive_ = std::move(keep_alive);
  poke();
}

void client_pump::detach() {
  watch_socket(-1);
  timer_.cancel();
  timer_armed_ = false;
  zh_ = nullptr;
  keep_alive_.reset();
}

void client_pump::watch_socket(int fd) {
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) != 0) fd = -1;
  if (fd == fd_ && (fd < 0 || (st.st_dev == fd_dev_ && st.st_ino == fd_ino_))) return;
  if (fd_ >= 0) {
    // Cancels the waits (their handlers see an old epoch) and forgets the
    // registration; the C client closes its sockets itself.
    socket_.release();
  }
  ++epoch_;
  read_armed_ = write_armed_ = false;
  fd_ = fd;
  fd_dev_ = st.st_dev;
  fd_ino_ = st.st_ino;
  if (fd >= 0) socket_.assign(fd);
}

void client_pump::poke() {
  if (!zh_) return;
  if (pumping_) {  // from a C callback inside zookeeper_process: the loop below goes round again
    poke_again_ = true;
    return;
  }
  pumping_ = true;
  int rounds = 0;
  do {
    poke_again_ = false;
    int fd = -1, interest = 0;
    timeval tv{};
    int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    if (rc == ZINVALIDSTATE) {
      pumping_ = false;
      detach();
      on_unrecoverable_();
      return;
    }
    watch_socket(fd);
    // Arm first, then look: readiness that came before the wait was armed is
    // seen by the look, readiness after it wakes the wait (a spare wake-up
    // costs one empty round; a missed one would hang).
    arm(fd >= 0 ? interest : 0, tv);
    if (int events = fd >= 0 ? ready_now(fd, interest) : 0) {
      zookeeper_process(zh_, events);
      if (!zh_) break;  // detached from a callback
      poke_again_ = true;
    }
  } while (poke_again_ && ++rounds < max_rounds);
  pumping_ = false;
  if (poke_again_ && zh_) {
    asio::post(timer_.get_executor(), [this, keep = keep_alive_.lock()] { poke(); });
  }
}

void client_pump::wait_for(asio::posix::stream_descriptor::wait_type type, bool& armed) {
  if (armed) return;
  armed = true;
  socket_.async_wait(type, [this, &armed, epoch = epoch_, keep = keep_alive_.lock()](std::error_code ec) {
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
  timer_.async_wait([this, keep = keep_alive_.lock()](std::error_code ec) {
    if (ec == asio::error::operation_aborted) return;  // re-armed or detached
    timer_armed_ = false;
    poke();
  });
}

}  // namespace zkasio::detail
