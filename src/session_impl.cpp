#include "session_impl.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <asio/post.hpp>

#include "requests.hpp"

namespace zkasio::detail {

// ---------------------------------------------------------------- helpers

node_stat to_stat(const Stat* s) {
  if (!s) return {};
  return {.czxid = s->czxid,
          .mzxid = s->mzxid,
          .pzxid = s->pzxid,
          .ctime = s->ctime,
          .mtime = s->mtime,
          .version = s->version,
          .cversion = s->cversion,
          .aversion = s->aversion,
          .ephemeral_owner = s->ephemeralOwner,
          .data_length = s->dataLength,
          .num_children = s->numChildren};
}

namespace {

// Codes that mean the request got no answer from the server (whatever the
// C client says went wrong on its side: a failed reconnection completes the
// queued requests with ZSYSTEMERROR, a reply out of order with
// ZRUNTIMEINCONSISTENCY), or only the refusal of a busy server
// (ZTHROTTLEDOP: refused before it was handled, so not through the leader,
// and with no results).
bool unanswered(int rc) {
  return rc != ZOK && (rc > ZAPIERROR || rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZAUTHFAILED ||
                       rc == ZNOTHING || rc == ZINVALIDCALLBACK || rc == ZNOWATCHER || rc == ZTHROTTLEDOP) &&
         rc != ZBADARGUMENTS && rc != ZUNIMPLEMENTED;
}

// ACLs in the C client's shape; the strings stay owned by `source`.
struct c_acl {
  std::vector<ACL> entries;
  ACL_vector vector{};
  explicit c_acl(const acl& source) {
    for (const auto& e : source)
      entries.push_back({e.perms, {const_cast<char*>(e.scheme.c_str()), const_cast<char*>(e.id.c_str())}});
    vector = {static_cast<std::int32_t>(entries.size()), entries.data()};
  }
};

int c_mode(create_mode mode) {
  switch (mode) {
    case create_mode::persistent: return ZOO_PERSISTENT;
    case create_mode::ephemeral: return ZOO_EPHEMERAL;
    case create_mode::persistent_sequential: return ZOO_PERSISTENT_SEQUENTIAL;
    case create_mode::ephemeral_sequential: return ZOO_EPHEMERAL_SEQUENTIAL;
    case create_mode::container: return ZOO_CONTAINER;
  }
  return ZOO_PERSISTENT;
}

bool sequential(create_mode mode) {
  return mode == create_mode::persistent_sequential || mode == create_mode::ephemeral_sequential;
}

// How often the host names are resolved again (they may move, in DNS).
constexpr int host_resolution_delay_ms = 30'000;

// Header (xid, type) of every request.
constexpr std::size_t header_bytes = 8;
// A multi's per-operation header (type, done, err) and its closing header.
constexpr std::size_t multi_header_bytes = 9;

}  // namespace

// ---------------------------------------------------------------- lifecycle

std::shared_ptr<session_core> session_core::make(const asio::any_io_executor& executor,
                                                 session_options options) {
  auto s = std::make_shared<session_impl>(executor, std::move(options));
  asio::dispatch(s->strand(), [s] { s->start(); });
  return s;
}

session_impl::session_impl(const asio::any_io_executor& executor, session_options options)
    : session_core(executor),
      options_(std::move(options)),
      pump_(strand_, &options_, [this] { on_unrecoverable(); }),
      retry_timer_(strand_),
      heartbeat_(strand_),
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
    // Only a malformed host string fails here (no I/O is done yet).
    if (options_.log) options_.log("zookeeper_init failed for hosts '" + options_.hosts + "'");
    set_state(session_state::closed);
    fail_everything(make_error_code(error::bad_arguments));
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
  heartbeat_.cancel();
  zhandle_t* zh = std::exchange(zh_, nullptr);
  // Fires the pending completions with ZCLOSING; frees the watcher objects
  // without calling them, so the watch points go after it.
  zookeeper_close(zh);
  index_.clear();
  points_.clear();
}

void session_impl::session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type == ZOO_SESSION_EVENT) static_cast<session_impl*>(context)->on_session_event(state);
}

void session_impl::on_session_event(int state) {
  if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) {
    id_.store(zoo_client_id(zh_)->client_id, std::memory_order_release);
    timeout_ms_.store(zoo_recv_timeout(zh_), std::memory_order_release);
    // The server saw the session when it handled the handshake, sent on this
    // socket: not later than now, nor earlier than the socket (the answer
    // may have come late).
    last_contact_.store(pump_.socket_seen().time_since_epoch().count(), std::memory_order_release);
    set_state(session_state::connected);
    for (auto& waiter : std::exchange(connect_waiters_, {})) waiter->complete({});
    for (auto& parked : std::exchange(parked_reads_, {})) parked.resend();
    std::vector<watch_point*> unarmed;
    for (auto& point : points_)
      if (point.indexed && !point.waiters.empty() && !point.registered && !point.arming)
        unarmed.push_back(&point);
    for (auto* point : unarmed) arm(point);
    for (auto* point : unarmed) withdraw_if_idle(point);
    start_heartbeat();
  } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
    // Not from inside the C client: the handle may be closed and replaced.
    asio::post(strand_, [self = shared_from_this()] { self->on_unrecoverable(); });
  } else if (this->state() == session_state::connected) {
    set_state(session_state::suspended);
  }
}

void session_impl::on_unrecoverable() {
  // Reported twice (the session event and zookeeper_interest); the second
  // report finds the handle replaced or already dealt with.
  if (!zh_ || closing_ || is_unrecoverable(zh_) != ZINVALIDSTATE ||
      state() == session_state::expired || state() == session_state::auth_failed)
    return;
  if (zoo_state(zh_) == ZOO_AUTH_FAILED_STATE) {
    set_state(session_state::auth_failed);
    fail_everything(make_error_code(error::auth_failed));
    close_handle();
    return;
  }
  // A session that will reconnect counts its next generation before it says
  // expired: whoever sees expired (from any thread: the state and the
  // generation are atomics) sees the new generation too, and knows that a
  // session follows (the lock engine's queue_again relies on it). Its id is
  // 0 from before that until the next handshake: whoever sees the new
  // generation never sees the old id with it (the lock engine's race_for
  // relies on it to tell its node).
  if (options_.reconnect_on_expiry) {
    id_.store(0, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  set_state(session_state::expired);
  auto ec = make_error_code(error::session_expired);
  for (auto& parked : std::exchange(parked_reads_, {})) parked.fail(ec);
  drop_all_watches(ec);
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

void session_impl::fail_everything(std::error_code ec) {
  for (auto& waiter : std::exchange(connect_waiters_, {})) waiter->complete(ec);
  for (auto& parked : std::exchange(parked_reads_, {})) parked.fail(ec);
  drop_all_watches(ec);
}

bool lost_in_transit(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSYSTEMERROR || rc == ZRUNTIMEINCONSISTENCY;
}

std::error_code session_impl::translate(int rc) const {
  switch (rc) {
    case ZOK: return {};
    // The request got no answer: it may have been applied, or not. The C
    // client says so in several ways (ZOPERATIONTIMEOUT: its socket timed out
    // while connecting), callers see one.
    case ZOPERATIONTIMEOUT:
    case ZSYSTEMERROR:
    case ZRUNTIMEINCONSISTENCY: return make_error_code(error::connection_loss);
    // The handle is being closed: by its owner, or because the session expired.
    case ZCLOSING:
      return make_error_code(state() == session_state::expired ? error::session_expired : error::session_closed);
    case ZINVALIDSTATE:
      // Also returned between two connection attempts, when nothing is lost yet.
      if (zh_ && is_unrecoverable(zh_) != ZINVALIDSTATE)
        return make_error_code(error::connection_loss);
      switch (state()) {
        case session_state::auth_failed: return make_error_code(error::auth_failed);
        case session_state::closed: return make_error_code(error::session_closed);
        default: return make_error_code(error::session_expired);
      }
    default: return make_error_code(static_cast<error>(rc));
  }
}

// last_contact is what the lost-lock policy counts on: the server that can
// expire the session (the ensemble's leader; a standalone server is its own)
// touched it at `submitted` or later. A follower answers reads and pings by
// itself for up to syncLimit x tickTime after it lost its leader, so only
// answers that went through the leader count. The leader learns of a
// follower's sessions from the follower's answers to its pings (every
// tickTime / 2), so its sight may lag this by up to that: the README says so.
void session_impl::note_answer(int rc, clock::time_point submitted) {
  if (unanswered(rc)) return;
  auto at = submitted.time_since_epoch().count();
  auto last = last_contact_.load(std::memory_order_acquire);
  if (at > last) last_contact_.store(at, std::memory_order_release);
}

// ------------------------------------------------------------ heartbeat

void session_impl::start_heartbeat() {
  auto period = negotiated_timeout() / 3;
  // Next look: a period after the last contact, or, while a heartbeat is in
  // flight (its answer moves last_contact), a period from now.
  heartbeat_.expires_at(heartbeat_in_flight_ ? clock::now() + period : last_contact() + period);
  heartbeat_.async_wait([weak = weak_from_this(), period](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->connected()) return;
    if (!self->heartbeat_in_flight_ && clock::now() - self->last_contact() >= period) {
      // A sync: the cheapest request that goes through the leader; its answer
      // moves last_contact (a read would be answered by a follower alone).
      c_client_scope scope(&self->options_);
      auto r = std::make_unique<request<>>(request<>{self.get(), nullptr});
      int rc = zoo_async(
          self->zh_, "/",
          [](int rc, const char*, const void* context) {
            take_back<request<>>(context, rc)->session->heartbeat_in_flight_ = false;
          },
          r.get());
      if (rc == ZOK) {
        r.release();
        self->heartbeat_in_flight_ = true;
        self->after_submit();
      }
    }
    self->start_heartbeat();
  });
}

// ---------------------------------------------------------------- input

std::error_code session_impl::unusable() const {
  if (closing_ || !zh_ || state() == session_state::closed)
    return make_error_code(error::session_closed);
  if (state() == session_state::auth_failed) return make_error_code(error::auth_failed);
  if (state() == session_state::expired && !options_.reconnect_on_expiry)
    return make_error_code(error::session_expired);
  return {};
}

std::error_code session_impl::admit(std::string_view path, bool seq, std::size_t bytes) const {
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
    case session_state::closed: done->complete(make_error_code(error::session_closed)); return;
    case session_state::auth_failed: done->complete(make_error_code(error::auth_failed)); return;
    case session_state::expired:
      if (!options_.reconnect_on_expiry) {
        done->complete(make_error_code(error::session_expired));
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
  if (auto ec = unusable(); ec && ec != error::session_expired) {
    done->complete(ec, state());
    return;
  }
  if (known == session_state::expired && !options_.reconnect_on_expiry) {
    done->complete(make_error_code(error::session_expired), state());
    return;
  }
  auto it = state_waiters_.emplace(state_waiters_.end(), known, done);
  done->on_cancel = [this, it] { state_waiters_.erase(it); };
}

// ---------------------------------------------------------------- writes

void session_impl::create(std::string path, std::string data, create_options options,
                          completion_ptr<created> done) {
  if (refused(done, admit(path, sequential(options.mode),
                          header_bytes + request_size(op::create{path, data, options}))))
    return;
  c_client_scope scope(&options_);
  c_acl access(options.access);
  submit(std::make_unique<request<created>>(request<created>{this, done}),
         [&](auto* r) {
           return zoo_acreate2(
               zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &access.vector,
               c_mode(options.mode),
               [](int rc, const char* created_path, const Stat* st, const void* context) {
                 auto r = take_back<request<created>>(context, rc);
                 if (rc != ZOK) return r->fail(rc);
                 r->done->complete({}, created{created_path, to_stat(st)});
               },
               r);
         });
}

void session_impl::remove(std::string path, std::int32_t version, completion_ptr<> done) {
  if (refused(done, admit(path))) return;
  c_client_scope scope(&options_);
  submit(std::make_unique<request<>>(request<>{this, done}), [&](auto* r) {
    return zoo_adelete(
        zh_, path.c_str(), version,
        [](int rc, const void* context) {
          auto r = take_back<request<>>(context, rc);
          r->done->complete(r->session->translate(rc));
        },
        r);
  });
}

void session_impl::set_data(std::string path, std::string data, std::int32_t version,
                            completion_ptr<node_stat> done) {
  if (refused(done, admit(path, false, header_bytes + request_size(op::set_data{path, data, version}))))
    return;
  c_client_scope scope(&options_);
  submit(std::make_unique<request<node_stat>>(request<node_stat>{this, done}), [&](auto* r) {
    return zoo_aset(
        zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version,
        [](int rc, const Stat* st, const void* context) {
          auto r = take_back<request<node_stat>>(context, rc);
          if (rc != ZOK) return r->fail(rc);
          r->done->complete({}, to_stat(st));
        },
        r);
  });
}

void session_impl::add_auth(std::string scheme, std::string credentials, completion_ptr<> done) {
  if (refused(done, unusable())) return;
  if (refused(done, scheme.empty() ? make_error_code(error::bad_arguments) : std::error_code()))
    return;
  auths_.emplace_back(scheme, credentials);
  authenticated_.store(true, std::memory_order_release);
  c_client_scope scope(&options_);
  submit(std::make_unique<request<>>(request<>{this, done, clock::now(), false}), [&](auto* r) {
    return zoo_add_auth(
        zh_, scheme.c_str(), credentials.data(), static_cast<int>(credentials.size()),
        [](int rc, const void* context) {
          auto r = take_back<request<>>(context, rc);
          r->done->complete(r->session->translate(rc));
        },
        r);
  });
}

// A multi's C-side storage: lives until the multi's callback.
struct multi_request : request<std::vector<op_result>> {
  std::vector<multi_op> ops;
  std::vector<std::unique_ptr<c_acl>> acls;
  std::vector<std::string> created_paths;
  std::vector<Stat> stats;
  std::vector<zoo_op_t> c_ops;
  std::vector<zoo_op_result_t> results;
};

void session_impl::multi(std::vector<multi_op> ops, completion_ptr<std::vector<op_result>> done) {
  if (refused(done, ops.empty() ? make_error_code(error::bad_arguments) : std::error_code()))
    return;
  // The server checks the whole packet against jute.maxbuffer, so the whole counts.
  std::size_t bytes = header_bytes + multi_header_bytes;
  for (const auto& o : ops) bytes += multi_header_bytes + request_size(o);
  for (const auto& o : ops) {
    auto* c = std::get_if<op::create>(&o);
    const auto& path = std::visit([](const auto& x) -> const std::string& { return x.path; }, o);
    if (refused(done, admit(path, c && sequential(c->options.mode), bytes))) return;
  }

  auto r = std::make_unique<multi_request>();
  r->session = this;
  r->done = done;
  r->ops = std::move(ops);
  auto n = r->ops.size();
  r->created_paths.assign(n, std::string(max_path_length + 32, '\0'));
  r->stats.resize(n);
  r->c_ops.resize(n);
  r->results.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& c = r->c_ops[i];
    std::visit(
        [&](auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, op::check>) {
            zoo_check_op_init(&c, o.path.c_str(), o.version);
          } else if constexpr (std::is_same_v<T, op::create>) {
            r->acls.push_back(std::make_unique<c_acl>(o.options.access));
            zoo_create_op_init(&c, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                               &r->acls.back()->vector, c_mode(o.options.mode),
                               r->created_paths[i].data(),
                               static_cast<int>(r->created_paths[i].size()));
          } else if constexpr (std::is_same_v<T, op::remove>) {
            zoo_delete_op_init(&c, o.path.c_str(), o.version);
          } else {
            zoo_set_op_init(&c, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                            o.version, &r->stats[i]);
          }
        },
        r->ops[i]);
  }
  c_client_scope scope(&options_);
  submit(std::move(r), [&](multi_request* m) {
    return zoo_amulti(
        zh_, static_cast<int>(n), m->c_ops.data(), m->results.data(),
        [](int rc, const void* context) {
          auto m = take_back<multi_request>(context, rc);
          std::vector<op_result> results(m->ops.size());
          if (!unanswered(rc)) {
            for (std::size_t i = 0; i < results.size(); ++i) {
              results[i].error = m->session->translate(m->results[i].err);
              if (m->results[i].err != ZOK) continue;
              if (std::holds_alternative<op::create>(m->ops[i]))
                results[i].path = m->created_paths[i].c_str();
              if (std::holds_alternative<op::set_data>(m->ops[i]))
                results[i].stat = to_stat(&m->stats[i]);
            }
          }
          m->done->complete(m->session->translate(rc), std::move(results));
        },
        m);
  });
}

// ---------------------------------------------------------------- reads

void session_impl::retry_read(clock::time_point deadline, std::function<void()> resend,
                              std::function<void(std::error_code)> fail) {
  if (closing_) return fail(make_error_code(error::session_closed));
  if (clock::now() >= deadline) return fail(make_error_code(error::connection_loss));
  if (connected()) return resend();
  parked_reads_.push_back({deadline, std::move(resend), std::move(fail)});
  arm_retry_timer();
}

void session_impl::arm_retry_timer() {
  if (parked_reads_.empty()) return;
  auto earliest = std::min_element(parked_reads_.begin(), parked_reads_.end(),
                                   [](auto& a, auto& b) { return a.deadline < b.deadline; });
  retry_timer_.expires_at(earliest->deadline);
  retry_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    auto now = clock::now();
    for (auto it = self->parked_reads_.begin(); it != self->parked_reads_.end();) {
      if (it->deadline <= now) {
        it->fail(make_error_code(error::connection_loss));
        it = self->parked_reads_.erase(it);
      } else {
        ++it;
      }
    }
    self->arm_retry_timer();
  });
}

namespace {

// Sends a read; on connection loss it goes again within its deadline.
// `send(session, request)` makes the zoo_a* call; the C callback calls
// `finish_read` with its outcome.
template <class Result, class Send>
void send_read(session_impl* s, std::string path, completion_ptr<Result> done,
               session_core::clock::time_point deadline, Send send);

template <class Result, class Send>
struct read_request : request<Result> {
  std::string path;
  session_core::clock::time_point deadline;
  Send send;

  // The outcome of the read: a result, or a failure that may be retried.
  void finish(int rc, Result result) && {
    if (lost_in_transit(rc)) {
      auto s = this->session;
      s->retry_read(
          deadline,
          [s, path = std::move(path), done = this->done, deadline = deadline, send = send] {
            send_read<Result>(s, path, done, deadline, send);
          },
          [done = this->done](std::error_code ec) { done->complete(ec, Result{}); });
      return;
    }
    if (rc != ZOK) return this->fail(rc);
    this->done->complete({}, std::move(result));
  }
};

template <class Result, class Send>
void send_read(session_impl* s, std::string path, completion_ptr<Result> done,
               session_core::clock::time_point deadline, Send send) {
  using req = read_request<Result, Send>;
  auto r = std::make_unique<req>();
  r->session = s;
  r->through_leader = false;
  r->done = std::move(done);
  r->path = std::move(path);
  r->deadline = deadline;
  r->send = send;
  submit(std::move(r), [&](req* raw) { return send(s->handle(), raw); });
}

}  // namespace

void session_impl::exists(std::string path, completion_ptr<std::optional<node_stat>> done) {
  if (refused(done, admit(path))) return;
  c_client_scope scope(&options_);
  using result = std::optional<node_stat>;
  auto send = [](zhandle_t* zh, auto* r) {
    using req = std::remove_pointer_t<decltype(r)>;
    return zoo_aexists(
        zh, r->path.c_str(), 0,
        [](int rc, const Stat* st, const void* context) {
          auto r = take_back<req>(context, rc);
          if (rc == ZNONODE) return std::move(*r).finish(ZOK, std::nullopt);
          std::move(*r).finish(rc, rc == ZOK ? result(to_stat(st)) : std::nullopt);
        },
        r);
  };
  send_read<result>(this, std::move(path), done,
                    clock::now() + options_.read_retry_timeout, send);
}

void session_impl::get_data(std::string path, completion_ptr<node_data> done) {
  if (refused(done, admit(path))) return;
  c_client_scope scope(&options_);
  auto send = [](zhandle_t* zh, auto* r) {
    using req = std::remove_pointer_t<decltype(r)>;
    return zoo_aget(
        zh, r->path.c_str(), 0,
        [](int rc, const char* value, int length, const Stat* st, const void* context) {
          auto r = take_back<req>(context, rc);
          node_data result;
          if (rc == ZOK) {
            if (value && length > 0) result.data.assign(value, static_cast<std::size_t>(length));
            result.stat = to_stat(st);
          }
          std::move(*r).finish(rc, std::move(result));
        },
        r);
  };
  send_read<node_data>(this, std::move(path), done,
                       clock::now() + options_.read_retry_timeout, send);
}

void session_impl::get_children(std::string path, completion_ptr<children> done) {
  if (refused(done, admit(path))) return;
  c_client_scope scope(&options_);
  auto send = [](zhandle_t* zh, auto* r) {
    using req = std::remove_pointer_t<decltype(r)>;
    return zoo_aget_children2(
        zh, r->path.c_str(), 0,
        [](int rc, const String_vector* names, const Stat* st, const void* context) {
          auto r = take_back<req>(context, rc);
          children result;
          if (rc == ZOK) {
            if (names) result.names.assign(names->data, names->data + names->count);
            result.stat = to_stat(st);
          }
          std::move(*r).finish(rc, std::move(result));
        },
        r);
  };
  send_read<children>(this, std::move(path), done,
                      clock::now() + options_.read_retry_timeout, send);
}

void session_impl::sync(std::string path, completion_ptr<> done) {
  if (refused(done, admit(path))) return;
  c_client_scope scope(&options_);
  submit(std::make_unique<request<>>(request<>{this, done}), [&](auto* r) {
    return zoo_async(
        zh_, path.c_str(),
        [](int rc, const char*, const void* context) {
          auto r = take_back<request<>>(context, rc);
          r->done->complete(r->session->translate(rc));
        },
        r);
  });
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
  close_probe_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
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
  retry_timer_.cancel();
  heartbeat_.cancel();
  fail_everything(make_error_code(error::session_closed));
  close_handle();
  set_state(session_state::closed);
  for (auto& waiter : std::exchange(close_waiters_, {})) waiter->complete({});
}

void session_impl::abandon() { close(nullptr); }

}  // namespace zkasio::detail
