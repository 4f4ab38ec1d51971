// A request handed to the C client: its context outlives the call and is
// given back, exactly once, to the C callback (also with ZCLOSING from
// zookeeper_close), which takes ownership again.
#pragma once

#include <memory>
#include <tuple>
#include <zkasio/error_code.hpp>

#include "session_impl.hpp"

namespace zkasio::detail {

// A plain pointer to the session suffices: the C client, which the session
// owns, calls back only from inside the session's own calls into it.
template <class... Values>
struct request {
  session_impl* session;
  completion_ptr<Values...> done;
  session_core::clock::time_point submitted = session_core::clock::now();
  // Writes and sync go through the ensemble's leader: their answers certify
  // the contacts answered a lag before they were sent (contact_tracker.hpp).
  // Reads, watches and authentication are answered by the server we are
  // connected to, which may have lost its leader.
  bool through_leader = true;

  void fail(int rc) { done->complete(session->translate(rc), Values{}...); }
};

// The C callback's side of a request context: owns it again, and records the
// answer as a contact (unless `rc` says no answer came).
template <class Request>
std::unique_ptr<Request> take_back(const void* context, int rc) {
  std::unique_ptr<Request> r(static_cast<Request*>(const_cast<void*>(context)));
  r->session->note_answer(rc, r->submitted, r->through_leader);
  return r;
}

// Completes `done` with `ec` when there is one: the request is not sent.
template <class... Values>
bool refused(const completion_ptr<Values...>& done, error_code ec) {
  if (!ec) return false;
  done->complete(ec, Values{}...);
  return true;
}

// Hands `r` to the C client through `call` (a zoo_a* call with r as context);
// on a synchronous failure the request completes with that error at once.
template <class Request, class Call>
void submit(std::unique_ptr<Request> r, Call call) {
  if (r->done->done()) return;  // cancelled before it was sent
  auto* session = r->session;
  int rc = call(r.get());
  if (rc != ZOK) {
    r->fail(rc);
    return;
  }
  r.release();  // the C client owns it until its callback
  session->after_submit();
}

}  // namespace zkasio::detail
