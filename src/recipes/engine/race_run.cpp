// The race recipes (race_mutex, election's race mode): one EPHEMERAL node at
// the path, created by whoever is first.
#include "recipes/engine/race_run.hpp"

#include "recipes/engine/engine_hold.hpp"
#include "recipes/engine/engine_nodes.hpp"

namespace zkasio::detail {

namespace {

// After a failed or cancelled race: deletes the node if this attempt's
// create took effect (found first: this session's node, which with the
// session's turn, kept by this frame until the removal is done, is the
// attempt's).
awaitable<error_code> remove_race_node(std::shared_ptr<engine_state> m, attempt a) {
  co_return co_await remove_node(
      m, "", {.owner = a.session_id, .generation = a.generation, .czxid = a.stat.czxid, .race = true, .find_first = true});
}

}  // namespace

// Seed 003's non-fair way: create the one EPHEMERAL node at the path; if it
// exists, wait for its deletion (a watch every waiter sets: each release
// wakes them all, the herd) and race again. race_acquire decides; this
// carries its actions out, keeping `a_` (the turn, the session, whether a
// create was sent) current for the hold or the cleanup.
void race_run::start_attempt(const acquire_request& request, std::optional<std::string>) {
  a_ = fresh_attempt(*m_, request);  // its node: the path itself (name "", engine_state::full)
  fsm_.emplace(request.try_once);
  ++runs_;
  act(fsm_->start(look()));
}

// The id is read after the generation, which is counted after the old id is
// cleared, the new id coming with the handshake (session_impl::on_unrecoverable):
// an id read with a generation is that generation's session's, or 0 (not made
// yet). (A designated initializer's elements are evaluated in order.)
race_acquire::look race_run::look() const {
  auto& s = m_->s;
  return {.generation = s.generation(),
          .session_id = s.id(),
          .connected = s.state() == session_state::connected,
          .awaiting_server = awaiting_server(s),
          .sure = session_sure(*m_),
          .never_sure = never_sure(*m_)};
}

void race_run::resume(const race_acquire::event& e) { act(fsm_->resume(e, look())); }

void race_run::act(race_acquire::action next) {
  using ra = race_acquire;
  a_.generation = fsm_->generation();
  a_.session_id = fsm_->session_id();
  if (auto* g = std::get_if<ra::granted>(&next)) {
    a_.stat = g->stat;
    return ended({});
  }
  if (auto* f = std::get_if<ra::fail>(&next)) return ended(f->ec);
  if (auto* c = std::get_if<ra::connect>(&next))
    return connect(c->after, [](error_code ec) -> ra::event { return ra::connected{ec}; });
  if (auto* t = std::get_if<ra::take_turn>(&next)) return take_turn(t->wait);
  if (std::holds_alternative<ra::create>(next)) {
    a_.submitted = true;
    return m_->s.pinned(a_.generation).async_create(m_->path, node_data(), create_options(create_mode::ephemeral, node_acl(*m_)),
                              reply([](error_code ec, created made) -> ra::event { return ra::created{ec, made.stat}; }));
  }
  if (std::holds_alternative<ra::look_up>(next))
    return m_->s.async_exists(m_->path, reply([](error_code ec, std::optional<node_stat> st) -> ra::event {
                                return ra::looked_up{ec, st};
                              }));
  if (std::holds_alternative<ra::sync>(next))
    return m_->s.async_sync(m_->path, reply([](error_code ec) -> ra::event { return ra::synced{ec}; }));
  if (std::holds_alternative<ra::confirm>(next))
    return m_->s.async_confirm_contact(reply([](error_code ec) -> ra::event { return ra::confirmed{ec}; }));
  if (auto* r = std::get_if<ra::remove_own>(&next))
    return spawn(delete_node(m_, "", r->owner, a_.generation, r->czxid),
                 [](error_code ec) -> ra::event { return ra::removed{ec}; });
  if (std::holds_alternative<ra::watch>(next))
    return m_->s.async_wait_deleted(m_->path, reply([](error_code ec) -> ra::event { return ra::gone{ec}; }));
  // (Parents are shared containers: nothing to undo when stopped.)
  spawn(make_parents(m_, split_path(m_->path).first, a_), [](error_code ec) -> ra::event { return ra::parents_made{ec}; });
}

// The session's turn (see local_turns.hpp): from then on the attempt holds
// it, and its node, when it has one, is the only one of this session on the
// path.
void race_run::take_turn(bool wait) {
  local_turns::line_key key{m_->core, a_.generation};
  if (!wait) {
    a_.turn = m_->turns->try_take(key);
    return resume(race_acquire::turn_taken{{}, a_.turn != nullptr});
  }
  auto fed = current([](race_run& self, error_code ec, std::shared_ptr<local_turns::turn> turn) {
    self.a_.turn = std::move(turn);
    self.resume(race_acquire::turn_taken{ec, self.a_.turn != nullptr});
  });
  // A turn granted is taken, also by an attempt stopped meanwhile (whose
  // handler drops it: it passes on), lest the line wait for ever.
  auto take = [fed, m = m_, key](error_code ec) mutable { fed(ec, ec ? nullptr : m->turns->take(key)); };
  m_->turns->enter(key, m_->strand,
                   make_completion<>(pending_.bind(m_->strand, std::move(take)),
                                     m_->strand, m_->strand, read_cancellation));
}

void race_run::stop() {
  if (!running()) return;
  fsm_->abort();
  stop_pending();
}

std::vector<background<error_code>> race_run::discard_attempt() {
  auto a = std::exchange(a_, {});
  std::vector<background<error_code>> removing;
  if (a.submitted && a.turn) removing.emplace_back(m_->strand, remove_race_node(m_, std::move(a)));
  return removing;
}

}  // namespace zkasio::detail
