// A loopback TCP proxy that understands ZooKeeper's framing; see tcp_proxy.hpp.
//
// Everything that touches sockets or the mode runs on the proxy's own thread
// (its io_context). Public methods post a command there and wait until it has
// been applied, so a mode is in force when the method returns. Only the
// counters (atomics) and the cut flag (mutex + condition variable) are shared.

#include "support/tcp_proxy.hpp"

#include "support/zk_frames.hpp"

#include <asio.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>
#include <zkasio/error_code.hpp>

namespace zkasio::test {

namespace {

using asio::ip::tcp;

tcp::endpoint parse_upstream(const std::string& upstream) {
  const auto colon = upstream.rfind(':');
  if (colon == std::string::npos || colon + 1 == upstream.size()) {
    throw std::invalid_argument("tcp_proxy: upstream must be \"127.0.0.1:port\", got \"" +
                                upstream + "\"");
  }
  zkasio::error_code ec;
  const auto address = asio::ip::make_address(upstream.substr(0, colon), ec);
  if (ec || !address.is_loopback()) {
    throw std::invalid_argument("tcp_proxy: upstream must be a loopback address, got \"" +
                                upstream + "\"");
  }
  std::size_t used = 0;
  int port = 0;
  try {
    port = std::stoi(upstream.substr(colon + 1), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != upstream.size() - colon - 1 || port <= 0 || port > 65535) {
    throw std::invalid_argument("tcp_proxy: bad port in \"" + upstream + "\"");
  }
  return {address, static_cast<unsigned short>(port)};
}

}  // namespace

struct tcp_proxy::impl {
  struct connection;
  using connection_ptr = std::shared_ptr<connection>;

  // One direction's source socket with its reassembly buffer, and the queue of
  // whole frames waiting to be written to it.
  struct side {
    explicit side(tcp::socket s) : sock(std::move(s)) {}
    explicit side(asio::io_context& io) : sock(io) {}
    tcp::socket sock;
    std::array<unsigned char, 16 * 1024> chunk{};
    std::vector<unsigned char> pending;  // bytes read but not yet a whole frame
    bool first_frame_seen = false;       // the handshake came in (client side only)
    std::deque<frame> to_write;
    bool writing = false;
  };

  struct connection : std::enable_shared_from_this<connection> {
    connection(impl& o, tcp::socket client_socket)
        : owner(o), client(std::move(client_socket)), server(o.io) {}

    impl& owner;
    side client;  // reads requests from the client, writes replies to it
    side server;  // reads replies from the server, writes requests to it
    std::deque<frame> held;                  // server frames kept back (hold_replies)
    bool handshake_delivered = false;        // the server's first frame reached the client
    std::optional<std::int32_t> cut_xid;     // the armed cut's request on this connection
    std::set<std::int32_t> failed_xids;      // requests whose replies say owner.failure_err
    cut cut_kind = cut::lose_reply;
    bool closed = false;
    bool closing = false;  // no more reads; close once the queued writes are out

    void start() {
      auto self = shared_from_this();
      server.sock.async_connect(owner.upstream, [self](const zkasio::error_code& ec) {
        if (self->closed) return;
        if (ec) {
          self->close_now();
          return;
        }
        zkasio::error_code ignored;
        self->client.sock.set_option(tcp::no_delay(true), ignored);
        self->server.sock.set_option(tcp::no_delay(true), ignored);
        self->read(self->client);
        self->read(self->server);
      });
    }

    void read(side& from) {
      auto self = shared_from_this();
      from.sock.async_read_some(
          asio::buffer(from.chunk), [self, &from](const zkasio::error_code& ec, std::size_t n) {
            if (self->closed || self->closing) return;
            if (ec) {
              // EOF or error from one side: whatever was already read from it
              // still goes to the other side, then both are closed.
              self->close_after_flush();
              return;
            }
            from.pending.insert(from.pending.end(), from.chunk.begin(), from.chunk.begin() + n);
            if (!self->split_frames(from)) return;
            if (self->closed || self->closing) return;
            self->read(from);
          });
    }

    // Takes every whole frame out of `from.pending` and acts on it. False when
    // the connection was closed meanwhile (or the stream is not ZooKeeper's).
    bool split_frames(side& from) {
      auto split = zkasio::test::split_frames(from.pending.data(), from.pending.size());
      for (auto& f : split.frames) {
        if (&from == &client) {
          on_request(std::move(f));
        } else {
          on_reply(std::move(f));
        }
        if (closed || closing) return false;
      }
      if (split.not_zookeeper) {
        close_now();
        return false;
      }
      from.pending.erase(from.pending.begin(),
                         from.pending.begin() + static_cast<std::ptrdiff_t>(split.consumed));
      return true;
    }

    // A whole client-to-server frame.
    void on_request(frame f) {
      if (!client.first_frame_seen) {
        client.first_frame_seen = true;  // ConnectRequest: forwarded as is
        send(server, std::move(f));
        owner.record_handshake();
        return;
      }
      const std::int32_t xid = frame_xid(f).value_or(-1);
      const auto type = request_type(f);
      if (type && owner.armed && xid >= 0) {
        if (!owner.armed_op || *owner.armed_op == *type) {
          owner.armed = false;
          if (owner.armed_cut == cut::lose_request) {
            close_now();
            owner.record_cut();
            return;
          }
          cut_xid = xid;
          cut_kind = owner.armed_cut;
        }
      }
      if (xid >= 0) owner.record_request(type);
      if (xid >= 0 && type && owner.failures_left > 0 && *type == owner.failure_op) {
        --owner.failures_left;
        failed_xids.insert(xid);
      }

      send(server, std::move(f));
    }

    // A whole server-to-client frame, as it comes from the server.
    void on_reply(frame f) {
      if (owner.holding) {
        if (frame_xid(f) == -1) owner.record_held_event();
        ++owner.held_frames;
        held.push_back(std::move(f));
      } else {
        deliver(std::move(f));
      }
    }

    // A server-to-client frame whose turn has come (not held, or released).
    void deliver(frame f) {
      if (auto xid = frame_xid(f); handshake_delivered && xid && failed_xids.erase(*xid)) f = error_reply(f, owner.failure_err);
      if (!handshake_delivered) {
        handshake_delivered = true;  // ConnectResponse: forwarded as is
      } else if (cut_xid && frame_xid(f) == *cut_xid) {
        // The reply to the armed request: delivered or not, then the end.
        cut_xid.reset();
        held.clear();
        if (cut_kind == cut::deliver_reply) send(client, std::move(f));
        close_after_flush();
        owner.record_cut();
        return;
      }
      send(client, std::move(f));
    }

    // Delivers the held frames in order (pass()).
    void release_held() {
      while (!held.empty() && !closed && !closing) {
        frame f = std::move(held.front());
        held.pop_front();
        deliver(std::move(f));
      }
    }

    void send(side& to, frame f) {
      to.to_write.push_back(std::move(f));
      if (!to.writing) write(to);
    }

    void write(side& to) {
      to.writing = true;
      auto self = shared_from_this();
      asio::async_write(to.sock, asio::buffer(to.to_write.front()),
                        [self, &to](const zkasio::error_code& ec, std::size_t) {
                          to.writing = false;
                          if (self->closed) return;
                          if (ec) {
                            self->close_now();
                            return;
                          }
                          to.to_write.pop_front();
                          if (!to.to_write.empty()) {
                            self->write(to);
                          } else if (self->closing) {
                            self->maybe_finish_closing();
                          }
                        });
    }

    // Stops reading; frames already queued for either side are written out,
    // then both sockets are closed.
    void close_after_flush() {
      if (closed || closing) return;
      closing = true;
      held.clear();
      maybe_finish_closing();
    }

    void maybe_finish_closing() {
      if (!client.writing && !server.writing) close_now();
    }

    void close_now() {
      if (closed) return;
      closed = true;
      held.clear();
      // The write queues stay: a write under way still refers to its front
      // frame until its (aborted) handler has run.
      zkasio::error_code ignored;
      client.sock.shutdown(tcp::socket::shutdown_both, ignored);
      client.sock.close(ignored);
      server.sock.shutdown(tcp::socket::shutdown_both, ignored);
      server.sock.close(ignored);
      owner.forget(shared_from_this());
    }
  };

  explicit impl(std::string up) : upstream(parse_upstream(up)), acceptor(io) {
    const tcp::endpoint listen_on(asio::ip::make_address_v4("127.0.0.1"), 0);
    acceptor.open(listen_on.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(listen_on);
    acceptor.listen();
    address = "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
    accept();
    thread = std::thread([this] { io.run(); });
  }

  ~impl() {
    asio::post(io, [this] {
      stopped = true;
      zkasio::error_code ignored;
      acceptor.close(ignored);
      accept_retry.cancel();
      close_all();
    });
    // Every socket is closed and the retry cancelled, so every pending
    // operation completes (aborted) without starting another one, and run()
    // returns by itself.
    work.reset();
    thread.join();
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  // Runs `command` on the proxy's thread and returns once it has run.
  void apply(std::function<void()> command) {
    std::promise<void> done;
    auto applied = done.get_future();
    asio::post(io, [&command, &done] {
      command();
      done.set_value();
    });
    applied.wait();
  }

  void accept() {
    acceptor.async_accept([this](const zkasio::error_code& ec, tcp::socket socket) {
      if (stopped || ec == asio::error::operation_aborted) return;
      if (!ec) {
        ++accepted;
        if (refusing) {
          zkasio::error_code ignored;
          socket.shutdown(tcp::socket::shutdown_both, ignored);
          socket.close(ignored);
        } else {
          auto c = std::make_shared<connection>(*this, std::move(socket));
          connections.insert(c);
          ++open;
          c->start();
        }
        accept();
        return;
      }
      // Out of descriptors (a test's famine): the connection waits in the
      // backlog, and accepting again at once would spin this thread.
      accept_retry.expires_after(std::chrono::milliseconds(10));
      accept_retry.async_wait([this](const zkasio::error_code& waited) {
        if (!stopped && !waited) accept();
      });
    });
  }

  void forget(const connection_ptr& c) {
    if (connections.erase(c) > 0) --open;
  }

  void close_all() {
    // close_now() erases from the set: iterate over a copy.
    const auto all = connections;
    for (const auto& c : all) c->close_now();
  }

  void record_cut() {
    {
      std::lock_guard lock(cut_mutex);
      cut_done = true;
    }
    cut_cv.notify_all();
  }

  void record_held_event() {
    {
      std::lock_guard lock(cut_mutex);
      ++held_events;
    }
    cut_cv.notify_all();
  }

  void record_handshake() {
    {
      std::lock_guard lock(cut_mutex);
      ++handshakes;
      last_handshake = std::chrono::steady_clock::now();
    }
    cut_cv.notify_all();
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  const tcp::endpoint upstream;
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry{io};
  std::string address;  // set before the thread starts, never changed
  std::thread thread;

  // Only touched on the proxy's thread.
  std::set<connection_ptr> connections;
  bool stopped = false;
  bool holding = false;
  bool refusing = false;
  bool armed = false;
  cut armed_cut = cut::lose_reply;
  std::optional<std::int32_t> armed_op;
  // fail_replies(): the replies to the next failures_left requests of type
  // failure_op say failure_err.
  std::int32_t failure_op = 0, failure_err = 0;
  std::size_t failures_left = 0;

  std::atomic<std::size_t> accepted{0};
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> requests{0};
  mutable std::mutex requests_mutex;
  std::map<std::int32_t, std::size_t> requests_by_type;  // under requests_mutex
  void record_request(std::optional<std::int32_t> type) {
    ++requests;
    if (!type) return;
    std::lock_guard lock(requests_mutex);
    ++requests_by_type[*type];
  }
  std::atomic<std::size_t> held_frames{0};

  // Shared with the test's thread: cuts and handshakes happened.
  std::mutex cut_mutex;
  std::condition_variable cut_cv;
  bool cut_done = false;
  std::size_t handshakes = 0;
  std::size_t held_events = 0;
  std::chrono::steady_clock::time_point last_handshake{};
};

tcp_proxy::tcp_proxy(std::string upstream) : impl_(std::make_unique<impl>(std::move(upstream))) {}

tcp_proxy::~tcp_proxy() = default;

std::string tcp_proxy::address() const { return impl_->address; }

void tcp_proxy::pass() {
  impl_->apply([this] {
    impl_->holding = false;
    const auto all = impl_->connections;
    for (const auto& c : all) c->release_held();
  });
}

void tcp_proxy::hold_replies() {
  impl_->apply([this] { impl_->holding = true; });
}

void tcp_proxy::drop_now() {
  impl_->apply([this] { impl_->close_all(); });
}

void tcp_proxy::refuse_connections(bool refuse) {
  impl_->apply([this, refuse] { impl_->refusing = refuse; });
}

void tcp_proxy::pass_then_drop() {
  impl_->apply([this] {
    impl_->holding = false;
    const auto all = impl_->connections;
    for (const auto& c : all) {
      c->release_held();
      c->close_after_flush();
    }
  });
}

void tcp_proxy::arm_cut(cut what, std::optional<std::int32_t> op_type) {
  impl_->apply([this, what, op_type] {
    {
      std::lock_guard lock(impl_->cut_mutex);
      impl_->cut_done = false;  // wait_cut() now waits for this new cut
    }
    impl_->armed = true;
    impl_->armed_cut = what;
    impl_->armed_op = op_type;
  });
}

void tcp_proxy::fail_replies(std::int32_t op_type, std::int32_t err, std::size_t count) {
  impl_->apply([this, op_type, err, count] {
    impl_->failure_op = op_type;
    impl_->failure_err = err;
    impl_->failures_left = count;
  });
}

bool tcp_proxy::wait_held_events(std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->cut_mutex);
  return impl_->cut_cv.wait_for(lock, timeout, [&] { return impl_->held_events >= count; });
}

std::size_t tcp_proxy::frames_held() const { return impl_->held_frames.load(); }

std::size_t tcp_proxy::requests_forwarded() const { return impl_->requests.load(); }
std::size_t tcp_proxy::requests_forwarded(std::int32_t op_type) const {
  std::lock_guard lock(impl_->requests_mutex);
  auto it = impl_->requests_by_type.find(op_type);
  return it == impl_->requests_by_type.end() ? 0 : it->second;
}

std::optional<std::chrono::steady_clock::time_point> tcp_proxy::wait_handshakes(
    std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->cut_mutex);
  if (!impl_->cut_cv.wait_for(lock, timeout, [&] { return impl_->handshakes >= count; }))
    return std::nullopt;
  return impl_->last_handshake;
}

bool tcp_proxy::wait_cut(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->cut_mutex);
  return impl_->cut_cv.wait_for(lock, timeout, [this] { return impl_->cut_done; });
}

std::size_t tcp_proxy::connections_accepted() const { return impl_->accepted.load(); }

std::size_t tcp_proxy::connections_open() const { return impl_->open.load(); }

}  // namespace zkasio::test
