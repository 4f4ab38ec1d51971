// The ZooKeeper C client driven by a plain poll() loop, with no zkasio in
// between: tests use it to check the server directly and to exercise the
// fixture and the proxy.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace zkasio::test {

class raw_client {
 public:
  explicit raw_client(const std::string& hosts, int session_timeout_ms = 10000);
  ~raw_client();
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  zhandle_t* handle() const { return zh_; }
  int state() const { return zoo_state(zh_); }
  int session_events() const { return session_events_; }  // session watcher calls so far

  // Pumps the client until done() holds; false when `timeout` passed first.
  bool run_until(const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(5));
  bool await_connected(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Blocking conveniences over the asynchronous API; each returns the ZooKeeper
  // result code, or ZOPERATIONTIMEOUT when no reply came within 5 s.
  int create(const std::string& path, const std::string& data = {}, int flags = 0,
             std::string* created = nullptr);
  int get(const std::string& path, std::string* data = nullptr);
  int remove(const std::string& path);

 private:
  int finish(const std::shared_ptr<void>& pending, int submitted, std::string* value);
  static void on_session_event(zhandle_t*, int, int, const char*, void* self);
  zhandle_t* zh_ = nullptr;
  int session_events_ = 0;
};

}  // namespace zkasio::test
