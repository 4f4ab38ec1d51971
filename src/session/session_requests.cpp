// The session's requests: each handed to the C client (requests.hpp), its
// reply translated; watches through the watch registry. A request submitted
// while no server is connected waits for the connection (no session carried
// it, so it cannot have been applied); once sent, a read that hits a
// connection loss goes again (within read_retry_timeout), a write never (it
// may have been applied).
#include "c_client_scope.hpp"
#include "c_types.hpp"
#include "request_size.hpp"
#include "requests.hpp"
#include "session_impl.hpp"

namespace zkasio::detail {

namespace {

// Not connected: `done`'s request waits for the connection, bounded by its
// cancellation and the session's end; what `make_resend()` returns submits it
// again then. True if it waits. (Made only then: a request sent at once
// copies none of its arguments.)
template <class... Values, class MakeResend>
bool parked_until_connected(session_impl* s, const completion_ptr<Values...>& done, MakeResend make_resend) {
  if (s->connected()) return false;
  s->when_connected(
      session_core::clock::time_point::max(), make_resend(),
      [done](error_code ec) { done->complete(ec, Values{}...); }, [done] { return done->done(); });
  return true;
}

}  // namespace

// ---------------------------------------------------------------- writes

void session_impl::create(std::string path, std::string data, create_options options,
                          std::optional<std::uint64_t> pin, completion_ptr<created> done) {
  if (refused(done, admit(path, sequential(options.mode),
                          header_bytes + create_request_size(path, data, options.access))) ||
      refused(done, outlived(pin)))
    return;
  if (parked_until_connected(this, done, [&] {
        return [this, path = std::move(path), data = std::move(data), options = std::move(options), pin, done] {
          create(path, data, options, pin, done);
        };
      }))
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

void session_impl::remove(std::string path, std::int32_t version, std::optional<std::uint64_t> pin,
                          completion_ptr<> done) {
  if (refused(done, admit(path)) || refused(done, outlived(pin))) return;
  if (parked_until_connected(this, done, [&] {
        return [this, path = std::move(path), version, pin, done] { remove(path, version, pin, done); };
      })) return;
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
                            std::optional<std::uint64_t> pin, completion_ptr<node_stat> done) {
  if (refused(done, admit(path, false, header_bytes + set_data_request_size(path, data))) ||
      refused(done, outlived(pin)))
    return;
  if (parked_until_connected(this, done, [&] {
        return [this, path = std::move(path), data = std::move(data), version, pin, done] {
          set_data(path, data, version, pin, done);
        };
      }))
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
  if (refused(done, scheme.empty() ? error_code(zk_error::bad_arguments) : error_code()))
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

  // The C client's operations for `ops`, pointing into this storage.
  void prepare() {
    auto n = ops.size();
    created_paths.assign(n, std::string(max_path_length + 32, '\0'));
    stats.resize(n);
    c_ops.resize(n);
    results.resize(n);
    for (std::size_t i = 0; i < n; ++i) std::visit([&](auto& o) { prepare(i, o); }, ops[i]);
  }
  void prepare(std::size_t i, const op::check& o) { zoo_check_op_init(&c_ops[i], o.path.c_str(), o.version); }
  void prepare(std::size_t i, const op::create& o) {
    acls.push_back(std::make_unique<c_acl>(o.options.access));
    zoo_create_op_init(&c_ops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                       &acls.back()->vector, c_mode(o.options.mode), created_paths[i].data(),
                       static_cast<int>(created_paths[i].size()));
  }
  void prepare(std::size_t i, const op::remove& o) { zoo_delete_op_init(&c_ops[i], o.path.c_str(), o.version); }
  void prepare(std::size_t i, const op::set_data& o) {
    zoo_set_op_init(&c_ops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), o.version,
                    &stats[i]);
  }

  // Each operation's outcome, once the multi was answered (`rc`).
  std::vector<op_result> results_of(int rc) const {
    std::vector<op_result> out(ops.size());
    if (unanswered(rc)) return out;
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].error = session->translate(results[i].err);
      if (results[i].err != ZOK) continue;
      if (std::holds_alternative<op::create>(ops[i])) out[i].path = created_paths[i].c_str();
      if (std::holds_alternative<op::set_data>(ops[i])) out[i].stat = to_stat(&stats[i]);
    }
    return out;
  }
};

void session_impl::multi(std::vector<multi_op> ops, std::optional<std::uint64_t> pin,
                         completion_ptr<std::vector<op_result>> done) {
  if (refused(done, ops.empty() ? error_code(zk_error::bad_arguments) : error_code()) ||
      refused(done, outlived(pin)))
    return;
  // The server checks the whole packet against jute.maxbuffer, so the whole counts.
  std::size_t bytes = header_bytes + multi_header_bytes;
  for (const auto& o : ops) bytes += multi_header_bytes + request_size(o);
  for (const auto& o : ops) {
    auto* c = std::get_if<op::create>(&o);
    const auto& path = std::visit([](const auto& x) -> const std::string& { return x.path; }, o);
    if (refused(done, admit(path, c && sequential(c->options.mode), bytes))) return;
  }
  if (parked_until_connected(this, done, [&] {
        return [this, ops = std::move(ops), pin, done] { multi(ops, pin, done); };
      })) return;
  auto r = std::make_unique<multi_request>();
  r->session = this;
  r->done = done;
  r->ops = std::move(ops);
  r->prepare();
  c_client_scope scope(&options_);
  submit(std::move(r), [&](multi_request* m) {
    return zoo_amulti(
        zh_, static_cast<int>(m->ops.size()), m->c_ops.data(), m->results.data(),
        [](int rc, const void* context) {
          auto m = take_back<multi_request>(context, rc);
          m->done->complete(m->session->translate(rc), m->results_of(rc));
        },
        m);
  });
}

// ---------------------------------------------------------------- reads

namespace {

// Sends a read once connected; on connection loss it goes again within its
// deadline. `send(session, request)` makes the zoo_a* call; the C callback
// calls the request's `finish` with its outcome.
template <class Result, class Send>
void send_read(session_impl* s, std::string path, completion_ptr<Result> done,
               session_core::clock::time_point deadline, Send send);

// The read sent again once connected, unless its deadline passes first.
template <class Result, class Send>
void resend_read(session_impl* s, std::string path, completion_ptr<Result> done,
                 session_core::clock::time_point deadline, Send send) {
  s->when_connected(
      deadline, [s, path, done, deadline, send] { send_read<Result>(s, path, done, deadline, send); },
      [done](error_code ec) { done->complete(ec, Result{}); }, [done] { return done->done(); });
}

template <class Result, class Send>
struct read_request : request<Result> {
  std::string path;
  session_core::clock::time_point deadline;
  Send send;

  // The outcome of the read: a result, or a failure that may be retried.
  void finish(int rc, Result result) && {
    if (lost_in_transit(rc)) return resend_read<Result>(this->session, std::move(path), this->done, deadline, send);
    if (rc != ZOK) return this->fail(rc);
    this->done->complete({}, std::move(result));
  }
};

template <class Result, class Send>
void send_read(session_impl* s, std::string path, completion_ptr<Result> done,
               session_core::clock::time_point deadline, Send send) {
  if (!s->connected()) return resend_read<Result>(s, std::move(path), std::move(done), deadline, send);
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
  if (parked_until_connected(this, done, [&] {
        return [this, path = std::move(path), done] { sync(path, done); };
      })) return;
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

// ---------------------------------------------------------------- watches

void session_impl::wait_deleted(std::string path, completion_ptr<> done) {
  if (refused(done, admit(path))) return;
  watches_.add(watch_registry::watch_kind::data, std::move(path), {.deleted = std::move(done)});
}

void session_impl::wait_created(std::string path, completion_ptr<> done) {
  if (refused(done, admit(path))) return;
  watches_.add(watch_registry::watch_kind::data, std::move(path), {.created = std::move(done)});
}

void session_impl::wait_data_changed(std::string path, std::int32_t known_version,
                                     completion_ptr<event_type> done) {
  if (refused(done, admit(path))) return;
  watches_.add(watch_registry::watch_kind::data, std::move(path),
             {.changed = std::move(done), .known_version = known_version});
}

void session_impl::wait_children_changed(std::string path, std::int32_t known_cversion,
                                         completion_ptr<event_type> done) {
  if (refused(done, admit(path))) return;
  watches_.add(watch_registry::watch_kind::children, std::move(path),
             {.changed = std::move(done), .known_version = known_cversion});
}

}  // namespace zkasio::detail
