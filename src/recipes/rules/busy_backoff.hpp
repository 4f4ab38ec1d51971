// busy_backoff: how long a contender pauses before asking a server again
// that said it was busy.
//
// Why: a request that failed because the connection was lost is asked again
// once connected, which takes a while by itself. But a server that answers
// throttled_op (too many requests) or session_moved leaves the connection
// standing: asking again at once would hammer the server that asked for
// less. So the pause doubles while such answers keep coming, from `first`
// up to `most`, and starts again from `first` after a quiet spell: no busy
// answer for `most` past the end of the last pause. (A window of a few
// pauses would be shorter than one round trip on a loaded machine and start
// again from `first` in the middle of a run.) A busy answer that comes
// during a pause is the same burst (one shared listing answered busy reaches
// all who share it): it ends with that pause, so that they ask again
// together, and share again, rather than each pausing longer.
//
// Scope: one per mutex object (engine_state), touched on its strand.
#pragma once

#include <algorithm>
#include <chrono>
#include <system_error>
#include <zkasio/error.hpp>
#include <zkasio/error_code.hpp>

namespace zkasio::detail {

// A server's answer that asks the client to wait (busy_backoff) before it
// asks again: the connection stands.
inline bool busy_answer(error_code ec) {
  return ec == zk_error::throttled_op || ec == zk_error::session_moved;
}

class busy_backoff {
 public:
  using clock = std::chrono::steady_clock;

  explicit busy_backoff(clock::duration first = std::chrono::milliseconds(10),
                        clock::duration most = std::chrono::seconds(1))
      : first_(first), most_(most) {}

  // When to ask again, for a busy answer at `now`: the end of the pause.
  // (A time, not a duration: those who pause together wake together, in one
  // turn of the event loop, and share what they ask.)
  clock::time_point next(clock::time_point now) {
    bool in_a_row = last_ != clock::time_point{} && now - last_ <= pause_ + most_;
    if (!in_a_row || now >= last_ + pause_) {  // not during a pause: a new one
      pause_ = in_a_row ? std::min(2 * pause_, most_) : first_;
      last_ = now;
    }
    return last_ + pause_;
  }

 private:
  clock::duration first_, most_;
  clock::duration pause_{};
  clock::time_point last_{};
};

}  // namespace zkasio::detail
