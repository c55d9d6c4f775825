// tests/fuzz/engine/polls.cpp — a shard's pass against the model.
#include "engine/polls.hpp"

#include <stdexcept>

#include "engine/clock.hpp"
#include "engine/run.hpp"

namespace tickwheel::fuzz::engine {

// Byte `how`: the shard (bits 4-6 all set: one that does not exist), bit 3 a now of the poll's own
// (op bits 4-5: the clock, behind it, ahead of it, far ahead), bits 1 and 2 both set a sleep after.
void PollOps::op_poll(std::uint8_t op) {
  const std::size_t shards = run_.config.shards;
  const std::int64_t tick = run_.config.tick;
  Bytes& in = run_.in;
  const std::uint8_t how = in.u8();
  std::size_t shard = how % shards;
  if ((how & 0x70) == 0x70) shard = shards + (how & 1);  // one that does not exist
  std::optional<std::int64_t> now;
  if ((how & 0x08) != 0) {
    switch ((op >> 4) % 4) {
      case 0: now = g_clock; break;
      case 1: now = g_clock - sat_mul(in.u8(), tick); break;  // behind: the wheel keeps its time
      case 2: now = sat_add(g_clock, sat_mul(in.u8(), tick)); break;
      default: now = sat_add(g_clock, sat_mul(in.u16(), sat_mul(in.u8(), tick))); break;
    }
  }
  poll(shard, now, run_.limit());
  // Bits 1 and 2: then the loop sleeps until the shard's next deadline, as a loop does.
  if ((how & 0x06) == 0x06 && shard < shards) {
    const std::optional<Nanos> next = run_.engine->next_deadline(shard);
    run_.loop.sleep(shard, next ? std::optional<std::int64_t>(next->count()) : std::nullopt);
  }
}

void PollOps::poll(std::size_t shard, std::optional<std::int64_t> now, std::size_t limit) {
  Engine& engine = *run_.engine;
  TICKWHEEL_FUZZ_TRACE("poll(%zu, %lld, limit %lld)", shard, now ? ll(*now) : -1LL,
                       static_cast<long long>(limit));
  if (shard >= run_.config.shards) return poll_missing(shard, now, limit);
  ShardModel& m = run_.model.shards[shard];
  if (m.plan) run_.loop.wake(shard);  // a sleeping loop wakes to poll
  if (m.polling) {
    // This thread polls it already, further out: a second poll of one shard is refused.
    check(catches<std::logic_error>([&] { static_cast<void>(engine.poll(shard, limit)); }),
          "a nested poll() of the shard being polled was not refused");
    return;
  }
  if (run_.model.stopped) {
    check((now ? engine.poll(shard, Nanos(*now), limit) : engine.poll(shard, limit)) == 0,
          "poll() after stop() ran something");
    return;
  }
  PollCtx ctx = run_.model.begin_pass(shard, now ? *now : g_clock, limit, run_.lifetimes);
  const std::size_t got = run_pass(ctx, now);
  finish_pass(ctx, got);
}

void PollOps::poll_missing(std::size_t shard, std::optional<std::int64_t> now, std::size_t limit) {
  Engine& engine = *run_.engine;
  check(catches<std::out_of_range>([&] {
          static_cast<void>(now ? engine.poll(shard, Nanos(*now), limit) : engine.poll(shard, limit));
        }),
        "poll() of a shard that does not exist did not throw out_of_range");
  check(catches<std::out_of_range>([&] { static_cast<void>(engine.next_deadline(shard)); }),
        "next_deadline() of a shard that does not exist did not throw out_of_range");
}

// The engine's poll, with the pass in progress on the model's stack; then its count: the
// callbacks run inline, or the tasks handed over. Leaves in `ctx` what the callbacks learnt.
std::size_t PollOps::run_pass(PollCtx& ctx, std::optional<std::int64_t> now) {
  EngineModel& model = run_.model;
  ShardModel& m = model.shards[ctx.shard];
  const QueueExecutor* executor = run_.executor.get();
  const std::uint64_t handed_before = executor != nullptr ? executor->handed : 0;
  model.polls.push_back(ctx);
  m.polling = true;
  const std::size_t got =
      now ? run_.engine->poll(ctx.shard, Nanos(*now), ctx.limit) : run_.engine->poll(ctx.shard, ctx.limit);
  m.polling = false;
  ctx = model.polls.back();
  model.polls.pop_back();
  TICKWHEEL_FUZZ_TRACE("  -> ran %zu", got);
  if (executor != nullptr) {
    check(got == executor->handed - handed_before, "poll() returned a count other than the tasks handed over",
          static_cast<long long>(got), lu(executor->handed - handed_before));
    settle_hand_overs(ctx, got);
  } else {
    check(got == ctx.ran, "poll() returned a count other than the callbacks run", static_cast<long long>(got),
          static_cast<long long>(ctx.ran));
  }
  return got;
}

void PollOps::finish_pass(const PollCtx& ctx, std::size_t got) {
  const bool complete = got < ctx.limit;
  const std::vector<std::uint32_t> in_doubt = settle_skips(ctx, complete);
  if (complete) {
    check_complete(ctx);
    run_.model.shards[ctx.shard].cur_floor = ctx.T;  // the wheel caught up with the poll's now
  }
  check_published(ctx.shard);
  for (std::uint32_t serial : in_doubt) run_.handles.cancel(serial);
}

// Below its limit the pass went through everything due that was linked before its last advance()
// call (earlier calls ended in a throw; what they linked behind runs in the next).
void PollOps::check_complete(const PollCtx& ctx) {
  const EngineModel& model = run_.model;
  const ShardModel& m = model.shards[ctx.shard];
  for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
    for (std::uint32_t serial : it->second) {
      const Rec& r = model.recs.at(serial);
      check(r.linked_poll == ctx.id && r.linked_call == ctx.call,
            "poll() stopped below its limit but left a due timer unrun", serial, lu(it->first));
    }
  }
}

// The counters the shard published at the pass's end.
void PollOps::check_published(std::size_t shard) {
  ShardModel& m = run_.model.shards[shard];
  const ShardStats st = run_.engine->stats().shards[shard];
  check(st.scheduled == m.scheduled, "stats().scheduled after a poll", lu(st.scheduled), lu(m.scheduled));
  check(st.rescheduled == m.rescheduled, "stats().rescheduled after a poll is not the moves applied",
        lu(st.rescheduled), lu(m.rescheduled));
  check(st.clears == m.clears && st.cleared == m.cleared,
        "stats().clears or cleared after a poll is not the clears served and what they cancelled",
        lu(st.clears), lu(m.cleared));
  run_.model.publish(shard);
  check(st.fired == m.fired, "stats().fired after a poll", lu(st.fired), lu(m.fired));
  check(st.rearmed == m.rearmed, "stats().rearmed after a poll", lu(st.rearmed), lu(m.rearmed));
  check(st.cancelled <= m.cancelled_reached && st.cancelled + m.cancelled_in_poll >= m.cancelled_reached,
        "stats().cancelled after a poll is outside what the shard can have met", lu(st.cancelled),
        lu(m.cancelled_reached));
  m.published_cancelled = st.cancelled;
}

// The timers due by the pass's now that it hands over rather than drops: one-shots, then periodic.
std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>> PollOps::due_for_hand_over(
    const PollCtx& ctx) const {
  const EngineModel& model = run_.model;
  const ShardModel& m = model.shards[ctx.shard];
  std::vector<std::uint32_t> one_shots, periodic;
  for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
    for (std::uint32_t serial : it->second) {
      const Rec& r = model.recs.at(serial);
      if (r.periodic && r.rule.skips(it->first, ctx.T)) continue;
      (r.periodic ? periodic : one_shots).push_back(serial);
    }
  }
  return {std::move(one_shots), std::move(periodic)};
}

// Which timers a poll handed to the executor: every due one (but skip timers a whole period
// behind) if it stopped below its limit; else `got` of them, which a one-shot's handle tells
// (expired()) and only the tasks tell for periodic timers.
void PollOps::settle_hand_overs(const PollCtx& ctx, std::size_t got) {
  EngineModel& model = run_.model;
  const auto [one_shots, periodic] = due_for_hand_over(ctx);
  if (got < ctx.limit) {
    check(got == one_shots.size() + periodic.size(),
          "a poll below its limit did not hand over every due timer", static_cast<long long>(got),
          static_cast<long long>(one_shots.size() + periodic.size()));
    for (std::uint32_t serial : one_shots) model.hand_over(serial);
    for (std::uint32_t serial : periodic) model.hand_over(serial);
    return;
  }
  std::size_t went = 0;
  for (std::uint32_t serial : one_shots) {
    const Rec& r = model.recs.at(serial);
    if (r.handle.expired()) {
      model.hand_over(serial);
      ++went;
    } else {
      check(!r.handle.cancelled(), "a due timer a cut-short poll left says cancelled", serial);
    }
  }
  check(went <= got && got - went <= periodic.size(), "a poll handed over more timers than were due",
        static_cast<long long>(got), static_cast<long long>(one_shots.size() + periodic.size()));
  const std::size_t rest = got - went;
  if (rest == periodic.size()) {
    for (std::uint32_t serial : periodic) model.hand_over(serial);
    return;
  }
  if (rest == 0) return;
  learn_periodic_hand_overs(periodic, rest);
}

// `rest` of the due periodic timers were handed over, and their handles do not say which: the
// queued tasks run at once, taking no action, and each task of one of them hands it over.
void PollOps::learn_periodic_hand_overs(const std::vector<std::uint32_t>& periodic, std::size_t rest) {
  EngineModel& model = run_.model;
  Callbacks& callbacks = run_.callbacks;
  TICKWHEEL_FUZZ_TRACE("  %zu of %zu due periodic timers handed over: running the queue to see which", rest,
                       periodic.size());
  for (std::uint32_t serial : periodic) model.recs.at(serial).maybe_handed = true;
  callbacks.maybe_ran = 0;
  const bool was_quiet = std::exchange(callbacks.quiet, true);
  run_.executor->run_all();
  callbacks.quiet = was_quiet;
  for (std::uint32_t serial : periodic) model.recs.at(serial).maybe_handed = false;
  check(callbacks.maybe_ran == rest, "the tasks run were not those of the periodic timers handed over",
        static_cast<long long>(callbacks.maybe_ran), static_cast<long long>(rest));
}

// Misfire::skip drops make no callback: the pass's skipped count says how many there were. A
// pass below its limit drops every skip timer a whole period behind that was linked before its
// last advance() call; the rest of such timers, and those cancelled during the pass, it may or
// may not have dropped. Returns the timers whose drop stays in doubt, for the caller to cancel
// once the pass's counters are checked.
std::vector<std::uint32_t> PollOps::settle_skips(const PollCtx& ctx, bool complete) {
  EngineModel& model = run_.model;
  ShardModel& m = model.shards[ctx.shard];
  std::vector<std::uint32_t> sure, maybe;
  for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
    for (std::uint32_t serial : it->second) {
      const Rec& r = model.recs.at(serial);
      if (!r.periodic || !r.rule.skips(it->first, ctx.T)) continue;
      const bool in_last_call = r.linked_poll == ctx.id && r.linked_call == ctx.call;
      (complete && !in_last_call ? sure : maybe).push_back(serial);
    }
  }
  const std::uint64_t delta = run_.engine->stats().shards[ctx.shard].skipped - m.skipped;
  const std::uint64_t least = sure.size() + ctx.unseen_skips;
  const std::uint64_t most = least + maybe.size() + ctx.cancelled_skips;
  check(delta >= least && delta <= most,
        "stats().skipped after a poll is outside what the pass can have dropped", lu(delta), lu(least));
  m.skipped += delta;
  m.rearmed += delta;
  for (std::uint32_t serial : sure) model.drop(serial, ctx);
  const std::uint64_t optional = delta - least;
  TICKWHEEL_FUZZ_TRACE("  skipped %llu: %zu sure, %llu of %zu in doubt and %llu cancelled", ull(delta),
                       sure.size(), ull(optional), maybe.size(), ull(ctx.cancelled_skips));
  if (optional == 0) return {};
  if (optional == maybe.size() + ctx.cancelled_skips) {
    for (std::uint32_t serial : maybe) model.drop(serial, ctx);
    return {};
  }
  return maybe;
}

}  // namespace tickwheel::fuzz::engine
