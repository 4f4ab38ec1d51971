// The session core's implementation: the only code that talks to the C client,
// with its parts: client_pump (drives the handle), watch_registry, heartbeat,
// contact_tracker and parked_requests. Everything here runs on the strand.
//
// Files: session_impl.cpp (the handle's lifecycle, the session's state,
// close), session_requests.cpp (the requests), watch_registry.cpp,
// heartbeat.cpp, contact_tracker.cpp, parked_requests.cpp; c_types.cpp converts the C client's
// types and codes.
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
#include <zkasio/error_code.hpp>

#include "c_client_scope.hpp"
#include "client_pump.hpp"
#include "contact_tracker.hpp"
#include "heartbeat.hpp"
#include "parked_requests.hpp"
#include "watch_registry.hpp"

namespace zkasio::detail {

class session_impl final : public session_core,
                           public std::enable_shared_from_this<session_impl> {
 public:
  session_impl(const asio::any_io_executor& executor, session_options options);
  ~session_impl() override;

  // Starts the first handle; separate from the constructor for shared_from_this.
  void start();

  void connect(completion_ptr<> done) override;
  void wait_state_change(session_state known, completion_ptr<session_state> done) override;
  void create(std::string path, std::string data, create_options options, std::optional<std::uint64_t> pin,
              completion_ptr<created> done) override;
  void remove(std::string path, std::int32_t version, std::optional<std::uint64_t> pin, completion_ptr<> done) override;
  void exists(std::string path, completion_ptr<std::optional<node_stat>> done) override;
  void get_data(std::string path, completion_ptr<node_data> done) override;
  void set_data(std::string path, std::string data, std::int32_t version, std::optional<std::uint64_t> pin,
                completion_ptr<node_stat> done) override;
  void get_children(std::string path, completion_ptr<children> done) override;
  void sync(std::string path, completion_ptr<> done) override;
  void multi(std::vector<multi_op> ops, std::optional<std::uint64_t> pin, completion_ptr<std::vector<op_result>> done) override;
  void wait_deleted(std::string path, completion_ptr<> done) override;
  void wait_created(std::string path, completion_ptr<> done) override;
  void wait_data_changed(std::string path, std::int32_t known_version,
                         completion_ptr<event_type> done) override;
  void wait_children_changed(std::string path, std::int32_t known_cversion,
                             completion_ptr<event_type> done) override;
  void add_auth(std::string scheme, std::string credentials, completion_ptr<> done) override;
  void confirm_contact(completion_ptr<> done) override;
  void close(completion_ptr<> done) override;
  void abandon() override;

  // The door through which the C client's callbacks (requests.hpp) and the
  // session's parts reach it; nothing else of it is theirs.
  zhandle_t* handle() const noexcept { return zh_; }
  const session_options& options() const noexcept { return options_; }
  bool connected() const noexcept { return state() == session_state::connected; }
  // The C client's code as the error callers see.
  error_code translate(int rc) const;
  // A reply came (`rc`) to a request sent at `submitted`; `through_leader`:
  // a write or a sync. last_contact moves as contact_tracker.hpp says.
  void note_answer(int rc, clock::time_point submitted, bool through_leader);
  // What proves a contact (contact_tracker.hpp), and how late the leader may
  // learn of one through a follower: a tick (see session_options::server_tick_time).
  const contact_tracker& contacts() const noexcept { return contacts_; }
  clock::duration contact_lag() const override;
  // A request was handed to the C client: let it send.
  void after_submit() { pump_.flush(); }
  // `resend` once connected (at once if connected), unless `deadline` passes
  // first (`fail` with connection_loss), the session ends (`fail` with why)
  // or the request is `abandoned` (cancelled: dropped). For a request
  // submitted while not connected, and a read that hit a connection loss.
  void when_connected(clock::time_point deadline, std::function<void()> resend,
                      std::function<void(error_code)> fail, std::function<bool()> abandoned);

 private:
  void open_handle();
  void close_handle();
  void on_session_event(int state);
  void on_unrecoverable();
  // The connection is gone (the session may live on): suspended.
  void on_disconnected();
  void set_state(session_state s);
  void fail_everything(error_code ec);
  // A failure ends the session for good: `why` for every operation from
  // now on, `what` (naming the host or server) in failure() and the log.
  void end_for_good(error_code why, std::string what);
  void finish_close();
  // Why the session can take no request now (closed, closing, auth failed,
  // expired for good), if it cannot.
  error_code unusable() const;
  // Why a write pinned to `pin` may not be sent: session_expired once that
  // ZooKeeper session has ended (a later generation, or expired for good).
  error_code outlived(std::optional<std::uint64_t> pin) const;
  // Why a request may not be sent (closing, a bad path, over jute.maxbuffer), if it may not.
  error_code admit(std::string_view path, bool sequential = false, std::size_t bytes = 0) const;

  static void session_watcher(zhandle_t*, int type, int state, const char*, void* context);

  session_options options_;
  zhandle_t* zh_ = nullptr;
  client_pump pump_;
  bool closing_ = false;
  error_code ended_by_;  // what ended the session for good (end_for_good), if a failure did
  std::vector<completion_ptr<>> connect_waiters_;
  std::list<std::pair<session_state, completion_ptr<session_state>>> state_waiters_;
  std::vector<completion_ptr<>> close_waiters_;
  // What async_add_auth was given (scheme, credentials): a handle opened
  // after an expiry starts without it, and is given it again.
  std::vector<std::pair<std::string, std::string>> auths_;

  watch_registry watches_;
  parked_requests parked_;
  contact_tracker contacts_;
  heartbeat heartbeat_;
  asio::steady_timer close_probe_timer_;
};

}  // namespace zkasio::detail
