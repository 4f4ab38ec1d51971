// How a session is configured, and the states it goes through.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace zkasio {

enum class session_state {
  connecting,   // no session established yet (or a new one after expiry)
  connected,    // the session is established and the connection healthy
  suspended,    // the connection was lost: the session may still live on the server
  expired,      // the server expired the session: its ephemeral nodes and watches are gone
  auth_failed,  // authentication failed: the session is unusable
  closed,       // closed by its owner
};

// The state's name ("connecting", "connected", ...), for logs.
const char* to_string(session_state state) noexcept;

struct session_options {
  // "host:port[,host:port...][/chroot]"; only numeric loopback or real hosts, as given.
  std::string hosts = "127.0.0.1:2181";
  // Requested session timeout; the server clamps it to its min/max.
  std::chrono::milliseconds session_timeout{10000};
  // The servers' tickTime. It bounds how much later than a follower's answer
  // the leader may learn that the session was active (a tick: the leader
  // pings its followers every half tick), and so how recent last_contact()
  // can be (session::last_contact; docs/guarantees.md has the arithmetic).
  // nullopt: ZooKeeper's defaults are assumed, a tickTime of at most 2,000 ms
  // and at most half the negotiated timeout (the servers' minSessionTimeout
  // is two ticks unless configured). Set it when the servers' tickTime is
  // larger, or their minSessionTimeout below two ticks; a smaller one makes
  // last_contact() more recent.
  std::optional<std::chrono::milliseconds> server_tick_time = std::nullopt;
  // After expiry, start a new ZooKeeper session at once (generation() then
  // counts up). Without it the session stays expired and every operation fails
  // with zk_error::session_expired.
  bool reconnect_on_expiry = true;
  // A read (exists, get_data, get_children) waits for the connection within
  // this time from its start: submitted while no server is connected, or
  // after a connection loss (it is sent again). A write waits for the
  // connection only until it is sent, with no time of its own (its
  // cancellation and the session's end bound it); once sent it is never sent
  // again: it may have been applied.
  std::chrono::milliseconds read_retry_timeout{10000};
  // The server's jute.maxbuffer: larger requests are refused before sending.
  std::size_t max_request_bytes = 0xfffff;
  // Where the C client's log lines go. None by default: nothing is printed.
  std::function<void(std::string_view)> log{};
};

}  // namespace zkasio
