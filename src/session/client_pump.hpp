// Drives one single-threaded C client handle from an Asio strand: the C
// client's socket is watched through a duplicate of its descriptor (ours to
// register and close: the C client's own is never touched, and no other
// object's epoll registration is disturbed when the C client's number is
// reused), and its timeouts with a steady_timer.
#pragma once

#include <sys/types.h>
#include <zookeeper/zookeeper.h>

#include <zkasio/session_options.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace zkasio::detail {

class client_pump {
 public:
  using strand_type = asio::any_io_executor;  // the session's strand (make_strand_over)

  // `on_unrecoverable` runs (on the strand) when the handle becomes unusable
  // (expired or authentication failed); `on_disconnected` when the handle is
  // seen to have left its connection. (The C client says that by a session
  // event queued for the next zookeeper_process that gets through: while
  // every reconnection fails inside zookeeper_process, as when a server
  // accepts and at once closes connections, it never comes.)
  client_pump(const strand_type& strand, const session_options* options,
              std::function<void()> on_unrecoverable, std::function<void()> on_disconnected);

  // Drives `zh` from now on. `keep_alive` (the owner) is held by every
  // pending wait, and only by them.
  void attach(zhandle_t* zh, std::shared_ptr<void> keep_alive);
  // Cancels the waits and closes the duplicate (the C client's socket stays).
  void detach();
  // Lets the C client do what it can now (replies included) and waits for
  // what it waits for.
  void poke();
  // After every request submitted: the C client's interest may have changed
  // (a partial send wants the socket writable). Processes no reply, so no
  // callback runs inside the submitter's frame.
  void flush();
  // The C client's socket, or -1.
  int socket() const noexcept { return fd_; }
  // When the pump first saw the current socket: its session handshake was
  // sent after this (a safe lower bound of the server's sight of the session
  // once the handshake is answered).
  std::chrono::steady_clock::time_point socket_seen() const noexcept { return socket_seen_; }

 private:
  // Watches `fd` from now on; true when it is another socket than before.
  bool watch_socket(int fd);
  void pump(bool process_replies);
  void arm(int interest, const timeval& tv);
  void wait_for(asio::posix::stream_descriptor::wait_type type, bool& armed);
  // Calls on_disconnected_ when the handle has left its connection since the
  // last look.
  void look_at_connection();

  zhandle_t* zh_ = nullptr;
  const session_options* options_;
  std::weak_ptr<void> keep_alive_;  // the owner; held strongly only by pending waits
  std::function<void()> on_unrecoverable_;
  std::function<void()> on_disconnected_;
  bool was_connected_ = false;  // the handle was connected at the last look
  asio::posix::stream_descriptor socket_;
  asio::steady_timer timer_;
  int fd_ = -1;  // the C client's descriptor, watched (socket_ holds our duplicate of it)
  // The C client's socket as last seen (watched or not yet: out of
  // descriptors). The fd number is recycled across reconnects: identify the
  // socket by inode.
  int seen_fd_ = -1;
  dev_t seen_dev_ = 0;
  ino_t seen_ino_ = 0;
  bool checked_while_connected_ = false;  // fd_ was checked in a round that found the client connected
  std::uint64_t epoch_ = 0;  // counts socket changes; waits of an older socket are ignored
  std::chrono::steady_clock::time_point socket_seen_{};
  bool read_armed_ = false;
  bool write_armed_ = false;
  bool timer_armed_ = false;
  asio::steady_timer::time_point timer_deadline_{};
  bool pumping_ = false;  // poke() was re-entered from a C callback
  bool poke_again_ = false;
};

}  // namespace zkasio::detail
