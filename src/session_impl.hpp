// The session core's implementation: the only code that talks to the C client
// (with client_pump, which drives it). Everything here runs on the strand.
#pragma once

#include <zookeeper/zookeeper.h>

#include <asio/steady_timer.hpp>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <zkasio/detail/session_core.hpp>
#include <zkasio/error.hpp>

#include "c_client_scope.hpp"
#include "client_pump.hpp"

namespace zkasio::detail {

node_stat to_stat(const Stat* s);
// The C client's codes for a request that got no answer from the server but
// may be sent again: the connection was lost (or the C client failed on its
// side) before the answer came.
bool lost_in_transit(int rc);

class session_impl final : public session_core,
                           public std::enable_shared_from_this<session_impl> {
 public:
  session_impl(const asio::any_io_executor& executor, session_options options);
  ~session_impl() override;

  // Starts the first handle; separate from the constructor for shared_from_this.
  void start();

  void connect(completion_ptr<> done) override;
  void wait_state_change(session_state known, completion_ptr<session_state> done) override;
  void create(std::string path, std::string data, create_options options,
              completion_ptr<created> done) override;
  void remove(std::string path, std::int32_t version, completion_ptr<> done) override;
  void exists(std::string path, completion_ptr<std::optional<node_stat>> done) override;
  void get_data(std::string path, completion_ptr<node_data> done) override;
  void set_data(std::string path, std::string data, std::int32_t version,
                completion_ptr<node_stat> done) override;
  void get_children(std::string path, completion_ptr<children> done) override;
  void sync(std::string path, completion_ptr<> done) override;
  void multi(std::vector<multi_op> ops, completion_ptr<std::vector<op_result>> done) override;
  void wait_deleted(std::string path, completion_ptr<> done) override;
  void wait_data_changed(std::string path, std::int32_t known_version,
                         completion_ptr<event_type> done) override;
  void wait_children_changed(std::string path, std::int32_t known_cversion,
                             completion_ptr<event_type> done) override;
  void add_auth(std::string scheme, std::string credentials, completion_ptr<> done) override;
  void close(completion_ptr<> done) override;
  void abandon() override;

  // Used by the C callbacks (requests.hpp, watches.cpp).
  std::error_code translate(int rc) const;
  // A reply came: the server saw the session at `submitted` at the latest.
  void note_answer(int rc, clock::time_point submitted);
  zhandle_t* handle() const noexcept { return zh_; }
  void after_submit() { pump_.flush(); }
  bool connected() const noexcept { return state() == session_state::connected; }
  // A read that failed for connection loss goes again once connected, unless
  // its deadline passed; `fail` runs if it cannot.
  void retry_read(clock::time_point deadline, std::function<void()> resend,
                  std::function<void(std::error_code)> fail);

  // Watches (watches.cpp).
  enum class watch_kind { data, children };
  struct watch_waiter {
    completion_ptr<> deleted{};            // waits for deletion only
    completion_ptr<event_type> changed{};  // waits for any change
    std::int32_t known_version = any_version;
    bool done() const { return deleted ? deleted->done() : changed->done(); }
  };
  // One watch this session holds (or is setting) on the server for a path and
  // kind; any number of waiters share it. Its address is the C watcher context.
  struct watch_point {
    session_impl* owner = nullptr;
    std::list<watch_point>::iterator self;  // in owner->points_
    std::string path;
    watch_kind kind = watch_kind::data;
    std::list<watch_waiter> waiters;
    bool indexed = true;       // found by new waiters; false once being withdrawn
    bool registered = false;   // the C client holds a watcher object for it
    bool arming = false;       // a get-with-watch request is in flight
    bool removing = false;     // a remove-watches request is in flight
    node_stat last;                 // the node as of the last arming reply
  };
  void on_watch_reply(watch_point* point, int rc, const Stat* st);
  void on_watch_event(watch_point* point, int type);
  void on_watches_removed(watch_point* point, int rc);

 private:
  void open_handle();
  void close_handle();
  void on_session_event(int state);
  void on_unrecoverable();
  void set_state(session_state s);
  void fail_everything(std::error_code ec);
  void start_heartbeat();
  void arm_retry_timer();
  void finish_close();
  // Why the session can take no request now (closed, closing, auth failed,
  // expired for good), if it cannot.
  std::error_code unusable() const;
  // Why a request may not be sent (closing, a bad path, over jute.maxbuffer), if it may not.
  std::error_code admit(std::string_view path, bool sequential = false, std::size_t bytes = 0) const;

  // Watches (watches.cpp).
  void add_waiter(watch_kind kind, std::string path, watch_waiter waiter);
  void arm(watch_point* point);
  void settle(watch_point* point, std::error_code ec, std::optional<event_type> event);
  void withdraw_if_idle(watch_point* point);
  void free_if_unused(watch_point* point);
  void drop_all_watches(std::error_code ec);

  static void session_watcher(zhandle_t*, int type, int state, const char*, void* context);
  static void node_watcher(zhandle_t*, int type, int state, const char*, void* context);

  session_options options_;
  zhandle_t* zh_ = nullptr;
  client_pump pump_;
  bool closing_ = false;
  std::vector<completion_ptr<>> connect_waiters_;
  std::list<std::pair<session_state, completion_ptr<session_state>>> state_waiters_;
  std::vector<completion_ptr<>> close_waiters_;
  // What async_add_auth was given (scheme, credentials): a handle opened
  // after an expiry starts without it, and is given it again.
  std::vector<std::pair<std::string, std::string>> auths_;

  struct parked_read {
    clock::time_point deadline;
    std::function<void()> resend;
    std::function<void(std::error_code)> fail;
  };
  std::list<parked_read> parked_reads_;
  asio::steady_timer retry_timer_;

  asio::steady_timer heartbeat_;
  bool heartbeat_in_flight_ = false;
  asio::steady_timer close_probe_timer_;

  std::list<watch_point> points_;
  std::map<std::pair<watch_kind, std::string>, watch_point*> index_;
};

}  // namespace zkasio::detail
