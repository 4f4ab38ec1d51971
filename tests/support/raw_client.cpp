#include "support/raw_client.hpp"

#include <poll.h>

#include <memory>
#include <stdexcept>

namespace zkasio::test {
namespace {

// A reply outlives the wait for it: the C client may call back after a timed-out
// wait (at the latest with ZCLOSING from zookeeper_close), so the context it
// holds owns a reference of its own, released by the one callback.
struct reply {
  bool done = false;
  int rc = ZOPERATIONTIMEOUT;
  std::string value;
};
using reply_ptr = std::shared_ptr<reply>;

void* context_for(const reply_ptr& r) { return new reply_ptr(r); }

reply_ptr take(const void* context) {
  std::unique_ptr<reply_ptr> owned(static_cast<reply_ptr*>(const_cast<void*>(context)));
  (*owned)->done = true;
  return *owned;
}

}  // namespace

int raw_client::finish(const std::shared_ptr<void>& pending, int submitted, std::string* value) {
  auto r = std::static_pointer_cast<reply>(pending);
  if (submitted != ZOK) return submitted;  // the C client did not take the context
  run_until([&] { return r->done; });
  if (value && r->done) *value = r->value;
  return r->done ? r->rc : ZOPERATIONTIMEOUT;
}

raw_client::raw_client(const std::string& hosts, int session_timeout_ms) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zh_ = zookeeper_init(hosts.c_str(), &raw_client::on_session_event, session_timeout_ms,
                       nullptr, this, 0);
  if (!zh_) throw std::runtime_error("zookeeper_init failed for " + hosts);
}

raw_client::~raw_client() { zookeeper_close(zh_); }

void raw_client::on_session_event(zhandle_t*, int, int, const char*, void* self) {
  ++static_cast<raw_client*>(self)->session_events_;
}

bool raw_client::run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    int fd = -1, interest = 0;
    timeval tv{};
    int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) return done();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    long wait_ms = std::min<long>(left, tv.tv_sec * 1000 + tv.tv_usec / 1000);
    pollfd p{fd, 0, 0};
    if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
    int ready = poll(&p, fd >= 0 ? 1 : 0, static_cast<int>(std::max<long>(wait_ms, 0)));
    int events = 0;
    if (ready > 0) {
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
      if (p.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
    }
    zookeeper_process(zh_, events);
  }
  return true;
}

bool raw_client::await_connected(std::chrono::milliseconds timeout) {
  return run_until([this] { return state() == ZOO_CONNECTED_STATE; }, timeout);
}

int raw_client::create(const std::string& path, const std::string& data, int flags,
                       std::string* created) {
  auto r = std::make_shared<reply>();
  void* context = context_for(r);
  int rc = zoo_acreate(
      zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, flags,
      [](int rc, const char* value, const void* context) {
        auto r = take(context);
        r->rc = rc;
        if (rc == ZOK) r->value = value;
      },
      context);
  if (rc != ZOK) delete static_cast<reply_ptr*>(context);
  return finish(r, rc, created);
}

int raw_client::get(const std::string& path, std::string* data) {
  auto r = std::make_shared<reply>();
  void* context = context_for(r);
  int rc = zoo_aget(
      zh_, path.c_str(), 0,
      [](int rc, const char* value, int length, const Stat*, const void* context) {
        auto r = take(context);
        r->rc = rc;
        if (rc == ZOK && value) r->value.assign(value, static_cast<std::size_t>(length));
      },
      context);
  if (rc != ZOK) delete static_cast<reply_ptr*>(context);
  return finish(r, rc, data);
}

int raw_client::remove(const std::string& path) {
  auto r = std::make_shared<reply>();
  void* context = context_for(r);
  int rc = zoo_adelete(
      zh_, path.c_str(), -1, [](int rc, const void* context) { take(context)->rc = rc; }, context);
  if (rc != ZOK) delete static_cast<reply_ptr*>(context);
  return finish(r, rc, nullptr);
}

}  // namespace zkasio::test
