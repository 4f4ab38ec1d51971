#include "support/raw_client.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <utility>

namespace zkasio::test {

raw_client::raw_client(const std::string& hosts, int session_timeout_ms, ZooLogLevel log_level) {
  zoo_set_debug_level(log_level);
  zh_ = zookeeper_init(hosts.c_str(), &raw_client::on_session_event, session_timeout_ms,
                       nullptr, this, 0);
  if (!zh_) throw std::runtime_error("zookeeper_init failed for " + hosts);
}

raw_client::~raw_client() { zookeeper_close(zh_); }

void raw_client::on_session_event(zhandle_t*, int type, int state, const char*, void* self) {
  auto& client = *static_cast<raw_client*>(self);
  ++client.session_events_;
  if (type == ZOO_SESSION_EVENT) client.session_states_.push_back(state);
}

bool raw_client::saw(int state) const {
  return std::find(session_states_.begin(), session_states_.end(), state) !=
         session_states_.end();
}

bool run_until(std::initializer_list<raw_client*> clients, const std::function<bool()>& done,
               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<pollfd> fds;
  std::vector<raw_client*> active;
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    fds.clear();
    active.clear();
    for (auto* c : clients) {
      int fd = -1;
      int interest = 0;
      timeval tv{};
      const int rc = zookeeper_interest(c->handle(), &fd, &interest, &tv);
      if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) continue;  // e.g. expired
      active.push_back(c);
      wait_ms = std::min<long long>(wait_ms, tv.tv_sec * 1000LL + (tv.tv_usec + 999) / 1000);
      pollfd p{fd, 0, 0};  // a negative fd is ignored by poll(): the client waits for tv
      if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
      if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
      fds.push_back(p);
    }
    if (active.empty()) return done();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait_ms, 0))) < 0) {
      if (errno == EINTR) continue;
      return done();
    }
    for (std::size_t i = 0; i < active.size(); ++i) {
      int events = 0;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
      if (fds[i].revents & POLLOUT) events |= ZOOKEEPER_WRITE;
      zookeeper_process(active[i]->handle(), events);
    }
  }
  return true;
}

bool raw_client::run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  return test::run_until({this}, done, timeout);
}

bool raw_client::await_connected(std::chrono::milliseconds timeout) {
  return run_until([this] { return connected(); }, timeout);
}

// A reply outlives the wait for it: the C client may call back after a timed-out
// wait (at the latest with ZCLOSING from zookeeper_close), so the context it
// holds owns a reference of its own, released by the one completion.
reply_handle raw_client::submit(const std::function<int(void* context)>& request) const {
  auto reply = std::make_shared<pending_reply>();
  reply->completed_ = completed_;
  void* context = new std::shared_ptr<pending_reply>(reply);
  const int rc = request(context);
  if (rc != ZOK) complete(context, rc);  // the C client did not take the context
  return reply;
}

void raw_client::complete(const void* context, int rc, std::string value) {
  using owner = std::shared_ptr<pending_reply>;
  const std::unique_ptr<owner> owned(static_cast<owner*>(const_cast<void*>(context)));
  auto& reply = **owned;
  reply.done_ = true;
  reply.rc_ = rc;
  reply.value_ = std::move(value);
  reply.order_ = ++*reply.completed_;
}

reply_handle raw_client::create_async(const std::string& path, const std::string& data,
                                      int flags) {
  return submit([&](void* context) {
    return zoo_acreate(
        zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
        flags,
        [](int rc, const char* value, const void* context) {
          complete(context, rc, rc == ZOK && value ? value : "");
        },
        context);
  });
}

reply_handle raw_client::get_async(const std::string& path) {
  return submit([&](void* context) {
    return zoo_aget(
        zh_, path.c_str(), 0,
        [](int rc, const char* value, int length, const Stat*, const void* context) {
          complete(context, rc,
                   rc == ZOK && value ? std::string(value, static_cast<std::size_t>(length))
                                      : std::string());
        },
        context);
  });
}

reply_handle raw_client::exists_async(const std::string& path) {
  return submit([&](void* context) {
    return zoo_aexists(
        zh_, path.c_str(), 0, [](int rc, const Stat*, const void* context) { complete(context, rc); },
        context);
  });
}

reply_handle raw_client::remove_async(const std::string& path) {
  return submit([&](void* context) {
    return zoo_adelete(
        zh_, path.c_str(), -1, [](int rc, const void* context) { complete(context, rc); }, context);
  });
}

int raw_client::await(const reply_handle& reply, std::string* value,
                      std::chrono::milliseconds timeout) {
  run_until([&] { return reply->done(); }, timeout);
  if (value && reply->done()) *value = reply->value();
  return reply->rc();
}

int raw_client::create(const std::string& path, const std::string& data, int flags,
                       std::string* created) {
  return await(create_async(path, data, flags), created);
}

int raw_client::get(const std::string& path, std::string* data) {
  return await(get_async(path), data);
}

int raw_client::exists(const std::string& path) { return await(exists_async(path)); }

int raw_client::remove(const std::string& path) { return await(remove_async(path)); }

}  // namespace zkasio::test
