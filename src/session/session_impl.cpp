#include "session_impl.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>

#include "c_types.hpp"
#include "requests.hpp"

namespace zkasio::detail {

namespace {

// How often the host names are resolved again (they may move, in DNS).
constexpr int host_resolution_delay_ms = 30'000;

// Why zookeeper_init refused the connect string `hosts`: no host in it
// resolved (unresolvable_host, naming each with the resolver's reason; the
// C client says so only in its log), or it is malformed. Resolves again, on
// this failure path only.
std::pair<error_code, std::string> refused_hosts(const std::string& hosts) {
  auto list = hosts.substr(0, hosts.find('/'));  // without the chroot
  std::string unresolved;
  bool any = false, resolved = false;
  for (std::size_t start = 0; start <= list.size();) {
    auto end = std::min(list.find(',', start), list.size());
    auto entry = list.substr(start, end - start);
    start = end + 1;
    auto colon = entry.rfind(':');
    if (entry.empty() || colon == std::string::npos) continue;
    any = true;
    auto host = entry.substr(0, colon), port = entry.substr(colon + 1);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (rc == 0) {
      freeaddrinfo(found);
      resolved = true;
      continue;
    }
    unresolved += (unresolved.empty() ? "" : ", ") + ("'" + host + "' (" + gai_strerror(rc) + ")");
  }
  if (any && !resolved)
    return {make_error_code(error::unresolvable_host),
            "no host of the connect string '" + hosts + "' could be resolved: " + unresolved};
  return {make_error_code(zk_error::bad_arguments), "the ZooKeeper client refused the connect string '" + hosts +
                                                        "' (expected host:port[,host:port...][/chroot])"};
}

// Whether a handshake's answer can be a ZooKeeper server's: a session id,
// and a negotiated timeout that a server gives to a client that asked for
// `asked` (the server's minimum when more than asked; no deployment's is a
// day). Another protocol's bytes read as ZooKeeper's handshake fail this:
// an HTTP server's "HTTP/1.1 400" gives " 400" as the timeout, 540291120 ms.
bool zookeeper_handshake(std::int64_t session_id, int negotiated_ms, std::chrono::milliseconds asked) {
  auto most = std::max<std::chrono::milliseconds>(asked, std::chrono::hours(24));
  return session_id != 0 && negotiated_ms > 0 && std::chrono::milliseconds(negotiated_ms) <= most;
}

}  // namespace

// ---------------------------------------------------------------- lifecycle

asio::any_io_executor make_strand_over(const asio::any_io_executor& executor) {
  if (auto* io = executor.target<asio::io_context::executor_type>()) return asio::make_strand(*io);
  return asio::make_strand(executor);
}

std::shared_ptr<session_core> session_core::make(const asio::any_io_executor& executor,
                                                 session_options options) {
  auto s = std::make_shared<session_impl>(executor, std::move(options));
  asio::dispatch(s->strand(), [s] { s->start(); });
  return s;
}

session_impl::session_impl(const asio::any_io_executor& executor, session_options options)
    : session_core(executor),
      options_(std::move(options)),
      pump_(strand_, &options_, [this] { on_unrecoverable(); }, [this] { on_disconnected(); }),
      watches_(*this),
      parked_(strand_),
      heartbeat_(*this, strand_),
      close_probe_timer_(strand_) {}

session_impl::~session_impl() {
  // Only reached with a handle when the executor dropped our handlers (the
  // io_context was destroyed before the session closed): it still has to go,
  // without calling the user's log sink, whose owner may be gone too.
  options_.log = nullptr;
  closing_ = true;
  close_handle();
}

void session_impl::start() { open_handle(); }

void session_impl::open_handle() {
  c_client_scope scope(&options_);
  zh_ = zookeeper_init2(options_.hosts.c_str(), &session_impl::session_watcher,
                        static_cast<int>(options_.session_timeout.count()), nullptr, this, 0,
                        &c_client_scope::forward);
  if (!zh_) {
    // A malformed connect string, or no host of it resolved (the C client
    // resolves them here).
    auto [why, what] = refused_hosts(options_.hosts);
    end_for_good(why, std::move(what));
    return;
  }
  // By default the C client resolves the host names again on every
  // zookeeper_interest call (a netlink socket and /etc/hosts read each time):
  // the pump calls it a few times per reply. Resolve at most this often.
  zoo_set_servers_resolution_delay(zh_, host_resolution_delay_ms);
  // The C client sends a handle's authentications first on every connection.
  for (auto& [scheme, credentials] : auths_)
    zoo_add_auth(zh_, scheme.c_str(), credentials.data(), static_cast<int>(credentials.size()), nullptr, nullptr);
  pump_.attach(zh_, shared_from_this());
}

void session_impl::close_handle() {
  if (!zh_) return;
  c_client_scope scope(&options_);
  pump_.detach();
  heartbeat_.stop();
  zhandle_t* zh = std::exchange(zh_, nullptr);
  // Fires the pending completions with ZCLOSING; frees the watcher objects
  // without calling them, so the watch points go after it.
  zookeeper_close(zh);
  watches_.forget_all();
}

void session_impl::session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type == ZOO_SESSION_EVENT) static_cast<session_impl*>(context)->on_session_event(state);
}

void session_impl::on_session_event(int state) {
  if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) {
    auto id = zoo_client_id(zh_)->client_id;
    if (!zookeeper_handshake(id, zoo_recv_timeout(zh_), options_.session_timeout)) {
      // Never connected: no request goes to it. (Not from inside the C
      // client: the handle is closed.)
      auto what = std::string(zoo_get_current_server(zh_)) + " answered the handshake as no ZooKeeper server does " +
                  "(negotiated session timeout " + std::to_string(zoo_recv_timeout(zh_)) + " ms, session id " +
                  std::to_string(id) + "): is it a ZooKeeper server's client port?";
      asio::post(strand_, [self = shared_from_this(), what = std::move(what)]() mutable {
        self->end_for_good(make_error_code(error::not_zookeeper), std::move(what));
      });
      return;
    }
    id_.store(id, std::memory_order_release);
    connections_.fetch_add(1, std::memory_order_acq_rel);
    timeout_ms_.store(zoo_recv_timeout(zh_), std::memory_order_release);
    // The server saw the session when it handled the handshake, sent on this
    // socket: not later than now, nor earlier than the socket (the answer
    // may have come late); so did the leader (contact_tracker.hpp).
    contacts_.connected(pump_.socket_seen());
    last_contact_.store(contacts_.certified().time_since_epoch().count(), std::memory_order_release);
    heartbeat_.answered(true);
    set_state(session_state::connected);
    for (auto& waiter : std::exchange(connect_waiters_, {})) waiter->complete({});
    // The watches first: a request submitted after a watch was asked for is
    // sent after its request (the lock engine's own-node watch relies on it).
    watches_.arm_waiting();
    parked_.resend_all();
    heartbeat_.start();
  } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
    // Not from inside the C client: the handle may be closed and replaced.
    asio::post(strand_, [self = shared_from_this()] { self->on_unrecoverable(); });
  } else {
    on_disconnected();
  }
}

void session_impl::on_disconnected() {
  if (state() == session_state::connected) set_state(session_state::suspended);
}

void session_impl::on_unrecoverable() {
  // Reported twice (the session event and zookeeper_interest); the second
  // report finds the handle replaced or already dealt with.
  if (!zh_ || closing_ || is_unrecoverable(zh_) != ZINVALIDSTATE ||
      state() == session_state::expired || state() == session_state::auth_failed)
    return;
  if (zoo_state(zh_) == ZOO_AUTH_FAILED_STATE) {
    set_state(session_state::auth_failed);
    fail_everything(make_error_code(zk_error::auth_failed));
    close_handle();
    return;
  }
  // A session that will reconnect counts its next generation before it says
  // expired: whoever sees expired (from any thread: the state and the
  // generation are atomics) sees the new generation too, and knows that a
  // session follows (the lock engine's queues_again, decisions.hpp, relies on it). Its id is
  // 0 from before that until the next handshake: whoever sees the new
  // generation never sees the old id with it (the lock engine's race_run
  // relies on it to tell its node).
  if (options_.reconnect_on_expiry) {
    id_.store(0, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  set_state(session_state::expired);
  auto ec = make_error_code(zk_error::session_expired);
  parked_.fail_all(ec);
  watches_.fail_all(ec);
  heartbeat_.fail_confirmations(ec);
  if (!options_.reconnect_on_expiry) {
    for (auto& waiter : std::exchange(connect_waiters_, {})) waiter->complete(ec);
    pump_.detach();  // the handle stays, so every request fails with session_expired
    return;
  }
  close_handle();
  set_state(session_state::connecting);
  open_handle();
}

void session_impl::set_state(session_state s) {
  state_.store(s, std::memory_order_release);
  for (auto it = state_waiters_.begin(); it != state_waiters_.end();) {
    if (it->first != s) {
      it->second->complete({}, s);
      it = state_waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void session_impl::fail_everything(error_code ec) {
  for (auto& waiter : std::exchange(connect_waiters_, {})) waiter->complete(ec);
  parked_.fail_all(ec);
  watches_.fail_all(ec);
  heartbeat_.fail_confirmations(ec);
}

void session_impl::end_for_good(error_code why, std::string what) {
  if (closing_ || state() == session_state::closed) return;
  if (options_.log) options_.log(what);
  {
    std::lock_guard<std::mutex> guard(failure_guard_);
    failure_ = std::move(what);
  }
  ended_by_ = why;
  closing_ = true;
  heartbeat_.stop();
  // Everything waiting fails before the handle goes: closing it forgets the
  // watch points, and their waiters with them (a watch always completes).
  fail_everything(why);
  close_handle();
  set_state(session_state::closed);
  for (auto& waiter : std::exchange(close_waiters_, {})) waiter->complete({});
}

error_code session_impl::translate(int rc) const {
  switch (rc) {
    case ZOK: return {};
    // The request got no answer: it may have been applied, or not. The C
    // client says so in several ways (ZOPERATIONTIMEOUT: its socket timed out
    // while connecting), callers see one.
    case ZOPERATIONTIMEOUT:
    case ZSYSTEMERROR:
    case ZRUNTIMEINCONSISTENCY: return make_error_code(zk_error::connection_loss);
    // The handle is being closed: by its owner, or because the session expired.
    case ZCLOSING:
      if (ended_by_) return ended_by_;
      if (state() == session_state::expired) return make_error_code(zk_error::session_expired);
      return make_error_code(error::session_closed);
    case ZINVALIDSTATE:
      // Also returned between two connection attempts, when nothing is lost yet.
      if (zh_ && is_unrecoverable(zh_) != ZINVALIDSTATE)
        return make_error_code(zk_error::connection_loss);
      switch (state()) {
        case session_state::auth_failed: return make_error_code(zk_error::auth_failed);
        case session_state::closed: return make_error_code(error::session_closed);
        default: return make_error_code(zk_error::session_expired);
      }
    default: return make_error_code(static_cast<zk_error>(rc));
  }
}

// last_contact is what the lost-lock policy counts on: a time at which the
// server that can expire the session (the ensemble's leader; a standalone
// server is its own) is known to have touched it. An answer proves that
// only with a later answer through the leader: contact_tracker.hpp.
void session_impl::note_answer(int rc, clock::time_point submitted, bool through_leader) {
  if (unanswered(rc)) return;
  contacts_.answered(submitted, clock::now(), through_leader, contact_lag());
  last_contact_.store(contacts_.certified().time_since_epoch().count(), std::memory_order_release);
  heartbeat_.answered(through_leader);
}

// A ping period (tickTime / 2) and as much again for the ping's delivery.
session_core::clock::duration session_impl::contact_lag() const {
  if (options_.server_tick_time) return *options_.server_tick_time;
  return std::min<clock::duration>(std::chrono::seconds(2), negotiated_timeout() / 2);
}

// ---------------------------------------------------------------- input

error_code session_impl::unusable() const {
  if (ended_by_) return ended_by_;
  if (closing_ || !zh_ || state() == session_state::closed)
    return make_error_code(error::session_closed);
  if (state() == session_state::auth_failed) return make_error_code(zk_error::auth_failed);
  if (state() == session_state::expired && !options_.reconnect_on_expiry)
    return make_error_code(zk_error::session_expired);
  return {};
}

error_code session_impl::outlived(std::optional<std::uint64_t> pin) const {
  // (Expired for good, a session is refused by admit: unusable.)
  if (pin && *pin != generation()) return make_error_code(zk_error::session_expired);
  return {};
}

error_code session_impl::admit(std::string_view path, bool seq, std::size_t bytes) const {
  if (auto ec = unusable()) return ec;
  if (auto problem = path_problem(path, seq); !problem.empty()) {
    if (options_.log) options_.log(problem);
    return make_error_code(error::invalid_path);
  }
  if (bytes > options_.max_request_bytes) {
    if (options_.log)
      options_.log("request of " + std::to_string(bytes) + " bytes for '" + std::string(path) +
                   "' is over the limit of " + std::to_string(options_.max_request_bytes) +
                   " (jute.maxbuffer)");
    return make_error_code(error::request_too_large);
  }
  return {};
}

// ---------------------------------------------------------------- state

void session_impl::connect(completion_ptr<> done) {
  switch (state()) {
    case session_state::connected: done->complete({}); return;
    case session_state::closed: done->complete(unusable()); return;
    case session_state::auth_failed: done->complete(make_error_code(zk_error::auth_failed)); return;
    case session_state::expired:
      if (!options_.reconnect_on_expiry) {
        done->complete(make_error_code(zk_error::session_expired));
        return;
      }
      break;
    default: break;
  }
  connect_waiters_.push_back(done);
  done->on_cancel = [this, raw = done.get()] {
    std::erase_if(connect_waiters_, [raw](auto& w) { return w.get() == raw; });
  };
}

void session_impl::wait_state_change(session_state known, completion_ptr<session_state> done) {
  if (state() != known) {
    done->complete({}, state());
    return;
  }
  // A state no session leaves: waiting for a change would be waiting for ever.
  if (auto ec = unusable(); ec && ec != zk_error::session_expired) {
    done->complete(ec, state());
    return;
  }
  if (known == session_state::expired && !options_.reconnect_on_expiry) {
    done->complete(make_error_code(zk_error::session_expired), state());
    return;
  }
  auto it = state_waiters_.emplace(state_waiters_.end(), known, done);
  done->on_cancel = [this, it] { state_waiters_.erase(it); };
}

// The leader has seen the session since now: at once if last_contact says
// so, else once a heartbeat's answer certifies a contact after now (a
// reconnection's handshake too). Waits across a disconnection; fails with
// the session's end.
void session_impl::confirm_contact(completion_ptr<> done) {
  if (refused(done, unusable())) return;
  heartbeat_.confirm(clock::now(), std::move(done));
}

// ---------------------------------------------------------------- waiting for the connection

void session_impl::when_connected(clock::time_point deadline, std::function<void()> resend,
                                  std::function<void(error_code)> fail, std::function<bool()> abandoned) {
  if (auto ec = unusable()) return fail(ec);
  if (clock::now() >= deadline) return fail(make_error_code(zk_error::connection_loss));
  if (connected()) return resend();
  parked_.park(deadline, std::move(resend), std::move(fail), std::move(abandoned), weak_from_this());
}

// ---------------------------------------------------------------- close

void session_impl::close(completion_ptr<> done) {
  if (state() == session_state::closed) {
    if (done) done->complete({});
    return;
  }
  if (done) close_waiters_.push_back(done);
  if (closing_) return;
  closing_ = true;
  if (!zh_ || !connected()) return finish_close();
  // zookeeper_close blocks until the server answers (or seconds pass): probe
  // first, and if the connection does not answer promptly, cut it so the
  // close cannot stall the executor.
  auto patience = std::min<std::chrono::milliseconds>(negotiated_timeout() / 3,
                                                      std::chrono::seconds(1));
  close_probe_timer_.expires_after(patience);
  close_probe_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec) return;
    if (int fd = self->pump_.socket(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
    self->finish_close();
  });
  c_client_scope scope(&options_);
  auto r = std::make_unique<request<>>(request<>{this, nullptr, clock::now(), false});
  int rc = zoo_aexists(
      zh_, "/", 0,
      [](int rc, const Stat*, const void* context) {
        auto r = take_back<request<>>(context, rc);
        // Not from inside the C client: zookeeper_close must not run in a callback.
        // (Also reached from ~session_impl, where nothing is left to post for.)
        if (auto s = r->session->weak_from_this().lock())
          asio::post(s->strand(), [s] { s->finish_close(); });
      },
      r.get());
  if (rc == ZOK) {
    r.release();
    after_submit();
  } else {
    finish_close();
  }
}

void session_impl::finish_close() {
  if (state() == session_state::closed) return;
  close_probe_timer_.cancel();
  heartbeat_.stop();
  fail_everything(make_error_code(error::session_closed));
  close_handle();
  set_state(session_state::closed);
  for (auto& waiter : std::exchange(close_waiters_, {})) waiter->complete({});
}

void session_impl::abandon() { close(nullptr); }

}  // namespace zkasio::detail
