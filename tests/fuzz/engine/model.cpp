// tests/fuzz/engine/model.cpp — the model's bookkeeping: where a timer goes when it is linked,
// cancelled, handed over, dropped, moved or cleared, and what a pass does before anything runs.
#include "engine/model.hpp"

#include <algorithm>
#include <utility>

#include "engine/lifetimes.hpp"

namespace tickwheel::fuzz::engine {

void EngineModel::start(std::int64_t clock) {
  shards.assign(cfg.shards, ShardModel{});
  polls.reserve(2 * cfg.shards + 1);  // polls nest at most once per shard: references stay valid
  for (ShardModel& m : shards) {
    m.wheel_now = clock;
    m.cur_floor = tick_of(clock);  // the wheel starts at its clock's tick
  }
}

std::uint64_t EngineModel::tick_of(std::int64_t now_ns) const {
  return std::min(static_cast<std::uint64_t>(now_ns) / static_cast<std::uint64_t>(cfg.tick), cfg.max_tick);
}

// ShardStats::pending as the model sees it: timers scheduled on the shard whose cancel has not
// won and, one-shot, that were not claimed to run (still queued or linked); a periodic timer
// counts wherever it is. What max_pending_per_shard admits against, and what a cancel can win.
std::uint64_t EngineModel::pending_on(std::size_t s) const {
  std::uint64_t n = 0;
  for (const auto& [serial, r] : recs) n += r.shard == s && is_pending(r) ? 1 : 0;
  return n;
}

// Whether this thread is shard s's own (what deadline(), clear() and for_each_pending() need, and
// where reschedule() moves at once): inside a callback of its pass, or its owner.
bool EngineModel::own_thread(std::size_t s) const {
  return (!polls.empty() && polls.back().shard == s) || owner == s;
}

// Whether this thread's schedules on shard s go straight into its wheel: a callback on its own
// shard, or the owner outside a callback of another shard.
bool EngineModel::links_directly(std::size_t s) const {
  return polls.empty() ? owner == s : polls.back().shard == s;
}

// The pass of shard s this thread is in (further out, if a callback polls another shard), or null.
const PollCtx* EngineModel::pass_of(std::size_t s) const {
  for (const PollCtx& ctx : polls) {
    if (ctx.shard == s) return &ctx;
  }
  return nullptr;
}

// Whether `ns` is the deadline the shard reads for the timer: its due tick's. Inside a pass of
// its shard a Misfire::skip timer a whole period behind may have been dropped to the next grid
// point already (see PollOps::settle_skips).
bool EngineModel::deadline_ok(const Rec& r, std::int64_t ns) const {
  if (ns == ns_of(r.due)) return true;
  const PollCtx* ctx = pass_of(r.shard);
  return ctx != nullptr && r.periodic && r.rule.skips(r.due, ctx->T) &&
         ns == ns_of(r.rule.first_grid_point_after(r.due, ctx->T, cfg.max_tick));
}

void EngineModel::link(std::uint32_t serial, Rec& r, std::uint64_t due) {
  r.due = due;
  r.where = Where::linked;
  r.floor = kNoFloor;
  shards[r.shard].linked[due].insert(serial);
}

void EngineModel::unlink(std::uint32_t serial, const Rec& r) {
  if (r.where != Where::linked) return;
  auto& linked = shards[r.shard].linked;
  const auto g = linked.find(r.due);
  g->second.erase(serial);
  if (g->second.empty()) linked.erase(g);
}

// The model's side of a cancel that won (Timer::cancel, or clear()): where it is counted.
void EngineModel::won_cancel(std::uint32_t serial) {
  Rec& r = recs.at(serial);
  ShardModel& m = shards[r.shard];
  ++m.cancelled_total;
  r.cancelled = true;
  r.ended_at = schedules_ok;
  switch (r.where) {
    case Where::queued: r.where = Where::ended; break;  // counted when the hand-off is transferred
    case Where::linked:
      ++m.cancelled_reached;
      if (m.polling) {
        ++m.cancelled_in_poll;
        for (PollCtx& ctx : polls) {
          if (ctx.shard == r.shard && r.periodic && r.rule.skips(r.due, ctx.T)) ++ctx.cancelled_skips;
        }
      }
      unlink(serial, r);
      r.where = Where::ended;
      break;
    case Where::running: ++m.cancelled_reached; break;  // counted when its callback returns
    default: break;  // out on the executor: counted when its node comes back
  }
}

// A due timer handed to the executor by a pass.
void EngineModel::hand_over(std::uint32_t serial) {
  Rec& r = recs.at(serial);
  ShardModel& m = shards[r.shard];
  unlink(serial, r);
  r.where = Where::handed;
  r.maybe_handed = false;
  ++m.fired;
  ++m.executing;
  if (r.periodic) {
    ++m.rearmed;
  } else {
    r.fired = true;
    r.ended_at = schedules_ok;
  }
}

// Where a dropped skip timer goes: the first grid point after now; at the horizon that is the
// last tick, at or before now, so it waits for the next advance() call.
void EngineModel::drop(std::uint32_t serial, const PollCtx& ctx) {
  Rec& r = recs.at(serial);
  unlink(serial, r);
  const std::uint64_t was_due = r.due;
  link(serial, r, r.rule.first_grid_point_after(was_due, ctx.T, cfg.max_tick));
  if (r.due <= ctx.T) {
    r.linked_poll = ctx.id;
    r.linked_call = ctx.call;
    r.linked_late = true;
    r.floor = was_due;  // the pass dropped it at its tick
  }
  TICKWHEEL_FUZZ_TRACE("  #%u skipped, re-armed for tick %lld", serial, lu(r.due));
}

// A move the shard applies: at once on its own thread, or a posted one as it drains its records
// (outside a pass, `T` is the tick of its last pass's now). A hand-off not taken in yet only takes
// the new tick. A linked timer is linked again as a callback's schedule would be, but a periodic
// one due by the pass's now waits in the due slot, as its re-arm would (wheel.hpp: it never runs
// twice in one advance() call), so it gets a re-arm's bookkeeping.
void EngineModel::apply_move(std::uint32_t serial, std::uint64_t due, std::uint64_t T) {
  Rec& r = recs.at(serial);
  ShardModel& m = shards[r.shard];
  ++m.rescheduled;
  TICKWHEEL_FUZZ_TRACE("  #%u moved to tick %lld", serial, lu(due));
  if (r.where == Where::queued) {
    r.due = due;
    return;
  }
  PollCtx* ctx = nullptr;
  for (PollCtx& c : polls) {
    if (c.shard == r.shard) ctx = &c;
  }
  // The pass may have dropped a skip timer a whole period behind before this move, as before a
  // cancel (see PollCtx::cancelled_skips).
  if (ctx != nullptr && r.periodic && r.rule.skips(r.due, ctx->T)) ++ctx->cancelled_skips;
  unlink(serial, r);
  link(serial, r, due);
  if (ctx == nullptr) {
    r.linked_poll = 0;
    // In the due slot, where a wheel left behind by a cut-short pass may run it early (Rec::floor).
    if (r.periodic && due <= T) r.floor = m.cur_floor;
    return;
  }
  r.linked_poll = ctx->id;
  r.linked_call = ctx->call;
  if (r.periodic) {
    r.linked_late = true;
    if (due <= ctx->T) r.floor = ctx->running_due;
  } else {
    r.linked_late = due <= ctx->running_due;
  }
}

// The shard drains its posted moves (at a pass's start, in clear() and for_each_pending(), in
// stop()), oldest first. Each applies iff its timer is still pending between runs: a one-shot that
// fired and a cancelled timer drop it; a periodic timer re-armed since keeps its generation, so it
// moves; one out on the executor, not yet re-armed, drops it.
void EngineModel::drain_moves(std::size_t s, std::uint64_t T) {
  const std::deque<Move> moves = std::exchange(shards[s].moves, {});
  for (const Move& mv : moves) {
    if (movable(recs.at(mv.serial))) apply_move(mv.serial, mv.due, T);
  }
}

// What clear() and for_each_pending() do first: the cancels posted to the shard retired (the
// model has them), its posted moves applied, and every hand-off taken in, transfer_cap aside.
void EngineModel::settle(std::size_t s) {
  ShardModel& m = shards[s];
  drain_moves(s, tick_of(m.wheel_now));
  const PollCtx* ctx = pass_of(s);
  while (!m.queue.empty()) {
    const std::uint32_t serial = m.queue.front();
    m.queue.pop_front();
    ++m.scheduled;
    Rec& r = recs.at(serial);
    if (r.cancelled) {
      ++m.cancelled_reached;
      continue;
    }
    link(serial, r, r.due);
    if (ctx != nullptr) {  // taken in during a pass: as a callback's schedule on its own shard
      r.linked_poll = ctx->id;
      r.linked_call = ctx->call;
      r.linked_late = r.due <= ctx->running_due;
    }
  }
}

// What a clear does to shard s, before the engine does it (the callables die in it): settles the
// shard, then cancels every timer pending between runs there. Returns them.
std::vector<std::uint32_t> EngineModel::clear(std::size_t s) {
  ShardModel& m = shards[s];
  settle(s);
  std::vector<std::uint32_t> cleared;
  for (const auto& [due, set] : m.linked) cleared.insert(cleared.end(), set.begin(), set.end());
  for (std::uint32_t serial : cleared) won_cancel(serial);
  ++m.clears;
  m.cleared += cleared.size();
  return cleared;
}

// The start of a pass with the executor: the nodes its tasks gave back. A one-shot's node is
// freed; a periodic timer is re-armed from the run it came back from, with the wheel's now still
// that of the last pass (tick T), or ends there if it was cancelled meanwhile.
void EngineModel::take_back(std::size_t s, std::uint64_t T, Lifetimes& lives) {
  ShardModel& m = shards[s];
  for (std::uint32_t serial : m.returned) {
    Rec& r = recs.at(serial);
    if (!r.periodic) continue;
    check(r.where == Where::returned, "a returned node is not the model's", serial);
    if (r.cancelled) {
      r.where = Where::ended;
      ++m.cancelled_reached;
      if (lives.alive.count(serial) != 0) lives.awaiting_death.insert(serial);  // dies in this drain
      continue;
    }
    r.linked_poll = 0;
    link(serial, r, r.rule.next_run(r.due, T, r.ran_until, cfg.tick, cfg.max_tick));
    // Due by T, it waits in the due slot, where a wheel left behind by a cut-short pass may run it
    // before it reaches its tick (see Rec::floor).
    if (r.due <= T) r.floor = m.cur_floor;
    TICKWHEEL_FUZZ_TRACE("  #%u back from its task, re-armed for tick %lld", serial, lu(r.due));
  }
  m.returned.clear();
}

// What a pass of shard s to `now` does before anything runs: its posted cancels and moves, the
// executor's returned nodes, a posted clear, then the transfer. Returns the pass's context.
PollCtx EngineModel::begin_pass(std::size_t s, std::int64_t now, std::size_t limit, Lifetimes& lives) {
  ShardModel& m = shards[s];
  const std::uint64_t last_T = tick_of(m.wheel_now);  // the wheel's now until this pass moves it
  m.wheel_now = std::max(m.wheel_now, now);
  m.loop_now = std::max(m.loop_now, now);
  const PollCtx ctx{.shard = s, .T = tick_of(m.wheel_now), .limit = limit, .id = ++polls_made};
  ++m.passes;
  m.cancelled_in_poll = 0;  // the pass drains the cancels posted before it
  drain_moves(s, last_T);   // then the moves, before anything runs
  take_back(s, last_T, lives);
  if (m.clear_posted) {  // a posted clear: every hand-off in, every timer pending cancelled
    m.clear_posted = false;
    TICKWHEEL_FUZZ_TRACE("  serves a posted clear");
    clear(s);
  }
  transfer(s);
  return ctx;
}

// The transfer: the oldest hand-offs first, at most transfer_cap of them.
void EngineModel::transfer(std::size_t s) {
  ShardModel& m = shards[s];
  std::size_t moved = 0;
  while (moved < cfg.cap && !m.queue.empty()) {
    const std::uint32_t serial = m.queue.front();
    m.queue.pop_front();
    ++moved;
    ++m.scheduled;
    Rec& r = recs.at(serial);
    if (r.cancelled) {
      ++m.cancelled_reached;
    } else {
      link(serial, r, r.due);
    }
  }
  if (moved == cfg.cap && !m.queue.empty()) ++m.cap_hits;
}

// The shard publishes its counters: at the end of a pass, in clear(), in stop().
void EngineModel::publish(std::size_t s) {
  ShardModel& m = shards[s];
  m.published_scheduled = m.scheduled;
  m.published_rescheduled = m.rescheduled;
}

}  // namespace tickwheel::fuzz::engine
