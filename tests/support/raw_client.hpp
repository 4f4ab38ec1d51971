// The ZooKeeper C client driven by a plain poll() loop, with no zkasio in
// between: tests use it to check the server directly and to exercise the
// fixture and the proxy.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace zkasio::test {

// The outcome of one asynchronous request, filled in when the C client calls
// back. It is shared with the C client's context, so it may outlive a wait
// that gave up on it.
class pending_reply {
 public:
  bool done() const { return done_; }
  int rc() const { return rc_; }  // ZOPERATIONTIMEOUT until done()
  const std::string& value() const { return value_; }  // created path, or data read
  // 1 for the first request of its client to complete, 2 for the next...; 0 until done().
  int order() const { return order_; }

 private:
  friend class raw_client;
  bool done_ = false;
  int rc_ = ZOPERATIONTIMEOUT;
  std::string value_;
  int order_ = 0;
  std::shared_ptr<int> completed_;  // the client's count of completed requests
};
using reply_handle = std::shared_ptr<const pending_reply>;

class raw_client {
 public:
  // No C client log level (0): for tests that cause connection losses on purpose.
  static constexpr ZooLogLevel quiet = static_cast<ZooLogLevel>(0);

  // `log_level` is the C client's, which is global to the process.
  explicit raw_client(const std::string& hosts, int session_timeout_ms = 10000,
                      ZooLogLevel log_level = ZOO_LOG_LEVEL_ERROR);
  ~raw_client();  // pending requests complete with ZCLOSING here
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  zhandle_t* handle() const { return zh_; }
  int state() const { return zoo_state(zh_); }
  bool connected() const { return state() == ZOO_CONNECTED_STATE; }
  std::int64_t session_id() const { return zoo_client_id(zh_)->client_id; }
  int session_events() const { return session_events_; }  // session watcher calls so far
  // The states the session events so far told of, in order.
  const std::vector<int>& session_states() const { return session_states_; }
  bool saw(int state) const;  // whether a session event told of `state`

  // Pumps the client until done() holds; false when `timeout` passed first.
  bool run_until(const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(5));
  bool await_connected(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Submit a request and return at once; pump the client to complete it. A
  // request the C client refused is done at once with its code.
  reply_handle create_async(const std::string& path, const std::string& data = {},
                            int flags = 0);
  reply_handle get_async(const std::string& path);
  reply_handle exists_async(const std::string& path);
  reply_handle remove_async(const std::string& path);

  // Pumps the client until `reply` is done; its code, or ZOPERATIONTIMEOUT when
  // it was not done within `timeout`. Stores its value in `*value` if given.
  int await(const reply_handle& reply, std::string* value = nullptr,
            std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Blocking conveniences: the request, then await() with the default timeout.
  int create(const std::string& path, const std::string& data = {}, int flags = 0,
             std::string* created = nullptr);
  int get(const std::string& path, std::string* data = nullptr);
  int exists(const std::string& path);
  int remove(const std::string& path);

 private:
  // Calls `request` with a context that owns a new reply, for the C client to
  // hand to the completion, which passes it to complete().
  reply_handle submit(const std::function<int(void* context)>& request) const;
  static void complete(const void* context, int rc, std::string value = {});
  static void on_session_event(zhandle_t*, int type, int state, const char*, void* self);

  zhandle_t* zh_ = nullptr;
  int session_events_ = 0;
  std::vector<int> session_states_;
  std::shared_ptr<int> completed_ = std::make_shared<int>(0);
};

// Runs the clients' event loops together (zookeeper_interest, poll,
// zookeeper_process) until done() holds; false when `timeout` passed first.
// A client whose session is over (e.g. expired) is left out.
bool run_until(std::initializer_list<raw_client*> clients, const std::function<bool()>& done,
               std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace zkasio::test
