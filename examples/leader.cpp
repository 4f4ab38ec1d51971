// leader: a job scheduler. Every process campaigns in one zkasio::election;
// the leader runs a periodic job (appending "<pid> <fencing token> <time>"
// to JOB_FILE, the time in nanoseconds since the epoch) inside
// with_leadership, so the job stops the moment leadership may be lost;
// followers print who leads. SIGINT or SIGTERM ends it (resigning first).
//
//   leader HOSTS ELECTION_PATH JOB_FILE [SESSION_TIMEOUT_MS [fair|race]]
#include <fcntl.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <iostream>
#include <string>
#include <zkasio/election.hpp>

using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

void append(const std::string& file, const std::string& line) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!written) throw std::runtime_error("cannot write " + file);
}

std::string me() { return std::to_string(::getpid()); }

// The leader's job: every 50 ms, one line; ends (cancelled) when leadership
// may be lost.
awaitable<void> run_job(const std::string& job_file, std::int64_t token) {
  asio::steady_timer period(co_await asio::this_coro::executor);
  for (;;) {
    auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    append(job_file, me() + " " + std::to_string(token) + " " + std::to_string(now) + "\n");
    period.expires_after(50ms);
    co_await period.async_wait(use_awaitable);
  }
}

// Campaigns again and again: each term runs the job until leadership may be
// lost (then lock_lost), and the process queues anew, until it is stopping.
awaitable<void> campaign(zkasio::election& e, std::string job_file, const bool& stopping) {
  while (!stopping) {
    try {
      co_await zkasio::with_leadership(e, me(), [&](const zkasio::lock& leading) -> awaitable<void> {
        std::cout << me() << " leads (fencing token " << leading.fencing_token().czxid << ")" << std::endl;
        co_await run_job(job_file, leading.fencing_token().czxid);  // (no local handoff here)
      });
    } catch (const zkasio::system_error& x) {
      if (x.code() == asio::error::operation_aborted || stopping) throw;
      std::cout << me() << " no longer leads: " << x.code().message() << std::endl;
    }
  }
}

// What a follower sees: every change of leader.
awaitable<void> follow(zkasio::election& e) {
  auto current = co_await e.async_leader(use_awaitable);
  for (;;) {
    std::cout << me() << " sees leader " << (current ? current->data : std::string("(none)")) << std::endl;
    current = co_await e.async_leader_changed(current, use_awaitable);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc >= 6 ? argv[5] : "fair";
  if (argc < 4 || argc > 6 || (mode != "fair" && mode != "race")) {
    std::cerr << "usage: leader HOSTS ELECTION_PATH JOB_FILE [SESSION_TIMEOUT_MS [fair|race]]\n";
    return 2;
  }
  asio::io_context io;
  zkasio::session_options options{.hosts = argv[1]};
  if (argc >= 5) options.session_timeout = std::chrono::milliseconds(std::stoi(argv[4]));
  zkasio::session s(io, options);
  zkasio::election e(s, argv[2], mode == "fair" ? zkasio::election_mode::fair : zkasio::election_mode::race);
  int status = 0;
  bool stopping = false;  // on a signal: what fails then is the shutdown
  asio::cancellation_signal stop_campaign, stop_follow;
  auto report = [&](std::exception_ptr ep) {
    if (!ep || stopping) return;
    try {
      std::rethrow_exception(ep);
    } catch (const zkasio::system_error& x) {
      if (x.code() == asio::error::operation_aborted) return;
      std::cerr << me() << ": " << x.what() << '\n';
      status = 1;
    }
    s.async_close([](zkasio::error_code) {});
  };
  asio::co_spawn(io, campaign(e, argv[3], stopping), asio::bind_cancellation_slot(stop_campaign.slot(), report));
  asio::co_spawn(io, follow(e), asio::bind_cancellation_slot(stop_follow.slot(), report));
  // Ending: resign (the campaign's cancellation), then close the session.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](zkasio::error_code ec, int) {
    if (ec) return;
    stopping = true;
    stop_campaign.emit(asio::cancellation_type::terminal);
    stop_follow.emit(asio::cancellation_type::terminal);
    s.async_close([](zkasio::error_code) {});
  });
  io.run();
  return status;
}
