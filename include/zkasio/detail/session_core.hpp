// The session's engine, behind the templates of session.hpp: it owns the C
// client handle and runs everything on one strand. Every member function but
// the observers must be called on strand(); session.hpp's operations get there
// with asio::dispatch. The implementation (src/session/session_impl.hpp, with its
// parts) is the only code that talks to the C client.
//
// Three names, three things: zkasio::session is the user's handle (an owner,
// or a lock's view that outlives it); session_core is what the handle's
// templates call, an interface so that no user's translation unit includes
// the C client's header (zookeeper.h brings C names and macros) and so that
// the observers below (atomics) read from any thread without a call;
// session_impl is its one implementation, on the C client.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <zkasio/detail/completion.hpp>
#include <zkasio/operations.hpp>
#include <zkasio/session_options.hpp>

namespace zkasio::detail {

// A strand over `executor`, type-erased. Over an io_context's own executor
// when that is what `executor` is: such a strand fits in any_io_executor's
// small buffer, and the strand's own questions to the executor below it
// (whether it may block, its allocator) are not type-erased, where each such
// question to an any_io_executor allocates (Asio 1.22). So a post to it, or
// a wait of an I/O object on it, allocates nothing of its own. Every session
// and every lock object runs on one.
asio::any_io_executor make_strand_over(const asio::any_io_executor& executor);

class session_core {
 public:
  using strand_type = asio::any_io_executor;  // make_strand_over's
  using clock = std::chrono::steady_clock;

  static std::shared_ptr<session_core> make(const asio::any_io_executor& executor,
                                            session_options options);
  virtual ~session_core() = default;

  const strand_type& strand() const noexcept { return strand_; }

  // Observers: safe from any thread.
  session_state state() const noexcept { return state_.load(std::memory_order_acquire); }
  std::int64_t id() const noexcept { return id_.load(std::memory_order_acquire); }
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  std::chrono::milliseconds negotiated_timeout() const noexcept {
    return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_acquire));
  }
  clock::time_point last_contact() const noexcept {
    return clock::time_point(clock::duration(last_contact_.load(std::memory_order_acquire)));
  }
  bool authenticated() const noexcept { return authenticated_.load(std::memory_order_acquire); }
  // How much later than a request's answer the leader may learn of the
  // session's contact through a follower (src/session/contact_tracker.hpp):
  // no answer certifies a contact sooner than this after it. Safe from any
  // thread.
  virtual clock::duration contact_lag() const = 0;
  // Counts the connections made (a handshake answered): when it changes, the
  // events of the connection before may have come in any order after it (the
  // server answers a re-sent watch at once if its node changed meanwhile,
  // not in the order of the changes).
  std::uint64_t connections() const noexcept { return connections_.load(std::memory_order_acquire); }
  // Why a failure ended the session for good (naming the host or server),
  // or empty. Safe from any thread.
  std::string failure() const {
    std::lock_guard<std::mutex> guard(failure_guard_);
    return failure_;
  }

  // Operations: on the strand. A write's `pin` (session::pinned): the
  // generation it was decided in; refused with session_expired, unsent, once
  // that ZooKeeper session has ended.
  virtual void connect(completion_ptr<> done) = 0;
  virtual void wait_state_change(session_state known, completion_ptr<session_state> done) = 0;
  virtual void create(std::string path, std::string data, create_options options, std::optional<std::uint64_t> pin,
                      completion_ptr<created> done) = 0;
  virtual void remove(std::string path, std::int32_t version, std::optional<std::uint64_t> pin, completion_ptr<> done) = 0;
  virtual void exists(std::string path, completion_ptr<std::optional<node_stat>> done) = 0;
  virtual void get_data(std::string path, completion_ptr<node_data> done) = 0;
  virtual void set_data(std::string path, std::string data, std::int32_t version, std::optional<std::uint64_t> pin,
                        completion_ptr<node_stat> done) = 0;
  virtual void get_children(std::string path, completion_ptr<children> done) = 0;
  virtual void sync(std::string path, completion_ptr<> done) = 0;
  virtual void multi(std::vector<multi_op> ops, std::optional<std::uint64_t> pin, completion_ptr<std::vector<op_result>> done) = 0;
  virtual void wait_deleted(std::string path, completion_ptr<> done) = 0;
  virtual void wait_created(std::string path, completion_ptr<> done) = 0;
  virtual void wait_data_changed(std::string path, std::int32_t known_version,
                                 completion_ptr<event_type> done) = 0;
  virtual void wait_children_changed(std::string path, std::int32_t known_cversion,
                                     completion_ptr<event_type> done) = 0;
  virtual void add_auth(std::string scheme, std::string credentials, completion_ptr<> done) = 0;
  virtual void confirm_contact(completion_ptr<> done) = 0;
  virtual void close(completion_ptr<> done) = 0;
  // Closes in the background once the owner is gone (the session's destructor).
  virtual void abandon() = 0;

 protected:
  explicit session_core(const asio::any_io_executor& executor) : strand_(make_strand_over(executor)) {}

  strand_type strand_;
  std::atomic<session_state> state_{session_state::connecting};
  std::atomic<std::int64_t> id_{0};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::int64_t> timeout_ms_{0};
  std::atomic<clock::rep> last_contact_{0};
  std::atomic<bool> authenticated_{false};
  std::atomic<std::uint64_t> connections_{0};
  mutable std::mutex failure_guard_;
  std::string failure_;  // under failure_guard_
};

}  // namespace zkasio::detail
