// A loopback TCP proxy that tests put between a ZooKeeper client and a server
// to cut, stall or blackhole that one client deterministically.
//
// It understands ZooKeeper's framing (4-byte big-endian length, then the body;
// on each connection the first frame each way is the session handshake, every
// later client frame starts with xid and op type, every later server frame with
// xid, zxid and err), so it can act on "the next request" and "its reply".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace zkasio::test {

class tcp_proxy {
 public:
  // Listens on 127.0.0.1 (a free port) and forwards each accepted connection to
  // `upstream` ("127.0.0.1:port"). Runs on its own thread until destroyed.
  explicit tcp_proxy(std::string upstream);
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  std::string address() const;  // "127.0.0.1:port": give this to the client

  // Forward both ways (the initial mode). Replies held back are delivered first.
  void pass();
  // Keep every server-to-client frame back (in order) until pass() or a drop.
  // Requests still reach the server.
  void hold_replies();
  // Close every connection through the proxy now (held replies are discarded).
  void drop_now();
  // While refusing, new connections are accepted and closed at once, so the
  // client cannot reach the server (a network partition for this client only).
  void refuse_connections(bool refuse);
  // Deliver the replies held back (hold_replies), then close every connection;
  // holding ends. The client sees those replies, then the connection loss.
  void pass_then_drop();

  // What an armed cut does to the next client request (a frame with xid >= 0;
  // of type `op_type` when given, e.g. ZOO_CREATE_OP = 1, ZOO_DELETE_OP = 2,
  // ZOO_EXISTS_OP = 3, ZOO_GETCHILDREN2_OP = 12, ZOO_CREATE2_OP = 15).
  enum class cut {
    lose_reply,     // forwarded; its reply is discarded and the connection closed:
                    // the server executed it, the client never learns its result
    deliver_reply,  // forwarded; its reply is delivered, then the connection closed
    lose_request,   // not forwarded: the connection is closed instead
  };
  void arm_cut(cut what, std::optional<std::int32_t> op_type = std::nullopt);
  void drop_after_next_request(std::optional<std::int32_t> op_type = std::nullopt) {
    arm_cut(cut::lose_reply, op_type);
  }
  // The replies to the next `count` requests of type `op_type` say `err`
  // (e.g. ZTHROTTLEDOP): the server's answer, with its body dropped. For
  // reads: the server did execute the request.
  void fail_replies(std::int32_t op_type, std::int32_t err, std::size_t count);
  // Waits until an armed cut has happened; false if `timeout` passed first.
  bool wait_cut(std::chrono::milliseconds timeout);

  // Waits until `count` watch notifications (server frames with xid -1) are
  // held back (hold_replies) in all; false if `timeout` passed first.
  bool wait_held_events(std::size_t count, std::chrono::milliseconds timeout);
  // Server frames held back (hold_replies) so far in all, delivered or not.
  std::size_t frames_held() const;

  // Requests (frames with xid >= 0 after the handshake) forwarded to the server
  // over all connections: a client's round trips, pings excluded.
  std::size_t requests_forwarded() const;
  // Those of type `op_type` (as for arm_cut).
  std::size_t requests_forwarded(std::int32_t op_type) const;
  // Waits until `count` session handshakes (ConnectRequests) have been
  // forwarded to the server in all, and returns when the last of them was;
  // nullopt if `timeout` passed first.
  std::optional<std::chrono::steady_clock::time_point> wait_handshakes(
      std::size_t count, std::chrono::milliseconds timeout);

  std::size_t connections_accepted() const;
  std::size_t connections_open() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace zkasio::test
