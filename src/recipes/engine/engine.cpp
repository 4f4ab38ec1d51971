// The engine object: its strand, its making, and its session's end told to
// the process-wide tables.
#include "recipes/engine/engine.hpp"

#include <cassert>

namespace zkasio::detail {

namespace {

// Tells known_nodes, and a race recipe's local_turns, when this mutex's
// session ends (see known_nodes.hpp and local_turns.hpp),
// for as long as the mutex lives: one pending state wait per mutex, withdrawn
// by ~engine_state.
void report_session_end(std::weak_ptr<engine_state> weak, session_state known, std::uint64_t generation) {
  auto m = weak.lock();
  if (!m) return;
  m->s.async_wait_state_change(
      known, asio::bind_cancellation_slot(
                 m->stop_reporting->slot(),
                 // (The handler keeps the signal its slot belongs to.)
                 asio::bind_executor(m->strand, [weak, generation, stop = m->stop_reporting](
                                                    error_code ec, session_state state) {
                   auto m = weak.lock();
                   if (!m || ec == asio::error::operation_aborted) return;
                   auto ended = [&](std::uint64_t g, bool expired) {
                     m->known->session_ended(m->session_in(g), expired);
                     auto why = expired ? make_error_code(zk_error::session_expired)
                                        : make_error_code(error::session_closed);
                     if (m->turns) m->turns->session_ended({m->core, g}, why);
                   };
                   // Every generation that passed expired (two may pass
                   // before this handler runs).
                   auto current = m->s.generation();
                   for (auto g = generation; g < current; ++g) ended(g, true);
                   if (state == session_state::expired && current == generation)
                     ended(current, true);  // for good (no reconnect_on_expiry)
                   else if (ec || state == session_state::closed || state == session_state::auth_failed)
                     ended(current, false);
                   if (!ec) report_session_end(weak, state, current);
                 })));
}

}  // namespace

std::shared_ptr<engine_state> make_engine(session& s, std::string_view path, mutex_options options,
                                          queue_family family, std::optional<lock_strand> strand, bool own_node) {
  if (auto problem = path_problem(path); !problem.empty())
    throw system_error(make_error_code(error::invalid_path), problem);
  if (path == "/")
    throw system_error(make_error_code(error::invalid_path), "the root cannot be a lock path");
  // Only a mutex is given a bound: other recipes take lock_options, and the
  // local handoff is the mutex rule's alone.
  assert(!options.local_handoff || family == queue_family::mutex);
  if (options.local_handoff && options.local_handoff->max_time.count() < 0)
    throw system_error(std::make_error_code(std::errc::invalid_argument),
                            "mutex_options::local_handoff: max_time is negative");
  if (options.policy == lost_policy::on_expiry && !own_node)
    throw system_error(make_error_code(error::invalid_policy), "the lock at " + std::string(path));
  auto engine = std::make_shared<engine_state>(s, std::string(path), std::move(options), family, std::move(strand));
  engine->own_node = own_node;
  report_session_end(engine, s.state(), s.generation());
  return engine;
}

lock_strand strand_of(const engine_state& engine) { return engine.strand; }

const std::string& path_of(const engine_state& engine) { return engine.path; }

queue_family family_of(const engine_state& engine) { return engine.family; }

}  // namespace zkasio::detail
