// tests/fuzz/engine/checks.cpp — the checks after every operation.
#include "engine/checks.hpp"

#include <algorithm>
#include <optional>

#include "engine/clock.hpp"
#include "engine/run.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::fuzz::engine {

void Invariants::check_all() {
  const EngineModel& model = run_.model;
  const Lifetimes& lives = run_.lifetimes;
  check(lives.awaiting_death.empty(), "a callable was not destroyed after its last run",
        lives.awaiting_death.empty() ? 0 : *lives.awaiting_death.begin());
  const EngineStats st = run_.engine->stats();
  std::uint64_t errors = 0, live = 0;
  for (std::size_t s = 0; s < run_.config.shards; ++s) {
    const ShardModel& m = model.shards[s];
    check_shard(s, st.shards[s]);
    errors += m.errors;
    live += m.queue.size() + m.executing;
    for (const auto& [due, set] : m.linked) live += set.size();
    check_next_deadline(s);
  }
  check(st.callback_errors == errors, "total callback_errors");
  const Callbacks& callbacks = run_.callbacks;
  if (callbacks.error_handler) {
    check(callbacks.errors_reported == errors, "on_callback_error was not called once per throw");
  }
  // Every pending timer's callable is alive (died() refuses the opposite); cancelled ones may
  // still be, until their shard meets them.
  check(lives.alive.size() >= live, "fewer callables alive than pending timers", lu(lives.alive.size()),
        lu(live));
  if (model.stopped) check(lives.alive.size() == live, "after stop() a cancelled timer's callable is alive");
  if (!model.serials.empty()) check_handle(model.serials.back());
}

// A shard's published counters: an owner's schedules, cancels and moves change its wheel at once,
// but its counters only as the shard next publishes them.
void Invariants::check_shard(std::size_t s, const ShardStats& ss) {
  const EngineModel& model = run_.model;
  const ShardModel& m = model.shards[s];
  check(ss.scheduled == m.published_scheduled && ss.fired == m.fired &&
            ss.cancelled == m.published_cancelled && ss.rearmed == m.rearmed && ss.skipped == m.skipped &&
            ss.rescheduled == m.published_rescheduled,
        "a shard's published stats changed outside its passes", lu(ss.scheduled), lu(ss.cancelled));
  check(ss.pending == model.pending_on(s),
        "stats().pending is not the timers scheduled and neither claimed nor cancelled", lu(ss.pending),
        lu(model.pending_on(s)));
  check(ss.executing == m.executing, "stats().executing is not the tasks handed over and not run",
        lu(ss.executing), lu(m.executing));
  check(ss.passes == m.passes && ss.transfer_cap_hits == m.cap_hits && ss.callback_errors == m.errors,
        "passes, transfer_cap_hits or callback_errors", lu(ss.passes), lu(m.passes));
  check(ss.queue_depth == m.queue.size(), "queue_depth", lu(ss.queue_depth), lu(m.queue.size()));
}

void Invariants::check_next_deadline(std::size_t s) {
  const ShardModel& m = run_.model.shards[s];
  const std::optional<Nanos> nd = run_.engine->next_deadline(s);
  if (run_.model.stopped) {
    check(!nd, "next_deadline() has a value after stop()", nd ? nd->count() : 0);
    return;
  }
  if (!m.queue.empty() || !m.returned.empty() || !m.moves.empty() || m.clear_posted) {
    check(nd && nd->count() == g_clock,
          "next_deadline() is not now while hand-offs, returned nodes, posted moves or a clear wait",
          nd ? nd->count() : -1);
    return;
  }
  // Cancelled timers the shard may not have met yet are still in its wheel.
  const bool maybe_more = m.cancelled_reached > m.published_cancelled;
  if (m.linked.empty()) {
    if (!maybe_more) check(!nd, "next_deadline() has a value with nothing linked", nd ? nd->count() : 0);
    return;
  }
  check(nd.has_value(), "next_deadline() is nullopt with timers linked");
  const std::int64_t earliest = sat_mul(static_cast<std::int64_t>(m.linked.begin()->first), run_.config.tick);
  check(nd->count() <= std::max(earliest, m.wheel_now), "next_deadline() is after the earliest due timer",
        nd->count(), earliest);
}

void Invariants::check_handle(std::uint32_t serial) {
  const EngineModel& model = run_.model;
  const Rec& r = model.recs.at(serial);
  const tickwheel::Timer& h = r.handle;
  check(static_cast<bool>(h) && h.status() == Status::ok && h.shard() == r.shard,
        "a good handle's bool, status or shard");
  const bool fresh = r.ended_at == model.schedules_ok;  // no schedule since: the node is not reused
  if (r.periodic) {
    check(!h.expired(), "a periodic timer's handle says expired", serial);
    check(r.cancelled ? h.cancelled() || !fresh : !h.cancelled(), "a periodic timer's handle", serial);
  } else if (r.cancelled) {
    check(!h.expired() && (h.cancelled() || !fresh), "a cancelled timer's handle", serial);
  } else if (r.fired) {
    check(!h.cancelled() && (h.expired() || !fresh), "a fired timer's handle", serial);
  } else {
    check(!h.cancelled() && !h.expired(), "a pending timer's handle says cancelled or expired", serial);
  }
  // pending() is exact in every state: it reads the generation, which no later timer shares.
  check(h.is_pending() == EngineModel::is_pending(r),
        "pending() is not whether the model says the timer may still run", serial,
        EngineModel::is_pending(r));
  const std::uint64_t raw = h.raw();
  const tickwheel::Timer back = run_.engine->timer_from_raw(raw);
  check(raw != 0 && back && back.raw() == raw && back.shard() == r.shard &&
            back.is_pending() == h.is_pending() && back.cancelled() == h.cancelled() &&
            back.expired() == h.expired(),
        "timer_from_raw(raw()) does not answer as the handle", serial);
}

}  // namespace tickwheel::fuzz::engine
