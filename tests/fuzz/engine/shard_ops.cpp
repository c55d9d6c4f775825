// tests/fuzz/engine/shard_ops.cpp — clear(), post_clear(), for_each_pending() and the shard's
// ownership against the model.
#include "engine/shard_ops.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/clock.hpp"
#include "engine/run.hpp"

namespace tickwheel::fuzz::engine {

// Whether `call` on shard s must be refused: past the last shard (std::out_of_range), or off the
// shard's own thread or inside a walk of it (std::logic_error); if so, checks that it is.
template <class Call>
bool ShardOps::refused(std::size_t s, Call call, const char* past_last, const char* not_own) {
  if (s >= run_.config.shards) {
    check(throws<std::out_of_range>(call), past_last);
    return true;
  }
  if (run_.model.own_thread(s) && !run_.model.shards[s].walking) return false;
  check(throws<std::logic_error>(call), not_own, static_cast<long long>(s));
  return true;
}

// Engine::clear(s). It settles the shard, then cancels every timer pending between runs there, as
// many cancel()s would: it returns how many, their callables die now and never run, and
// stats().cancelled then counts every cancel the shard has met (exact outside a pass of it; inside
// one, the poll's own check bounds it).
void ShardOps::clear_shard(std::size_t s) {
  EngineModel& model = run_.model;
  Engine& engine = *run_.engine;
  TICKWHEEL_FUZZ_TRACE("clear(%zu)", s);
  if (refused(
          s, [&] { static_cast<void>(engine.clear(s)); },
          "clear() of a shard that does not exist did not throw out_of_range",
          "clear() from a thread not the shard's, or from a walk of it, was not refused"))
    return;
  ShardModel& m = model.shards[s];
  const std::vector<std::uint32_t> cleared = model.clear(s);  // first: their callables die in clear()
  const std::size_t got = engine.clear(s);
  TICKWHEEL_FUZZ_TRACE("  -> cleared %zu", got);
  check(got == cleared.size(), "clear() did not cancel exactly the shard's pending timers",
        static_cast<long long>(got), static_cast<long long>(cleared.size()));
  for (std::uint32_t serial : cleared) {
    const tickwheel::Timer& h = model.recs.at(serial).handle;
    check(h.cancelled() && !h.is_pending() && run_.lifetimes.alive.count(serial) == 0,
          "a timer clear() cancelled does not say so, or its callable lives", serial);
  }
  model.publish(s);
  m.cancelled_in_poll = 0;  // every cancel posted to the shard is retired now
  if (model.pass_of(s) == nullptr) {
    const std::uint64_t c = engine.stats().shards[s].cancelled;
    check(c == m.cancelled_reached, "after clear() stats().cancelled is not every cancel the shard has met",
          lu(c), lu(m.cancelled_reached));
    m.published_cancelled = c;
  }
}

// Engine::post_clear(s) or post_clear_all() (bits 2-3 of `b` both set), from any thread: the
// shard is `own` + b (or one that does not exist, as EngineRun::api_shard picks). False once
// stopped, with nothing posted; else true, and the shard's next pass (or stop()) serves it (see
// EngineModel::begin_pass, StopOp). Before the first start there is nothing to clear and nothing is
// posted: the model learns whether the engine started only while no schedule has succeeded, from
// next_deadline() ("now" iff a clear waits), which is where it matters.
void ShardOps::post_clear(std::uint8_t b, std::size_t own) {
  EngineModel& model = run_.model;
  Engine& engine = *run_.engine;
  const bool all = (b & 0x0C) == 0x0C;
  const std::size_t s = run_.api_shard(own, b);
  TICKWHEEL_FUZZ_TRACE("post_clear%s(%zu)", all ? "_all" : "", all ? 0 : s);
  if (!all && s >= run_.config.shards) {
    check(throws<std::out_of_range>([&] { static_cast<void>(engine.post_clear(s)); }),
          "post_clear() of a shard that does not exist did not throw out_of_range");
    return;
  }
  const bool posted = all ? engine.post_clear_all() : engine.post_clear(s);
  check(posted == !model.stopped, "post_clear() was refused before stop(), or taken after it");
  if (model.stopped) return;
  for (std::size_t t = 0; t < run_.config.shards; ++t) {
    if (!all && t != s) continue;
    if (model.schedules_ok == 0) {
      const std::optional<Nanos> nd = engine.next_deadline(t);
      model.shards[t].clear_posted = nd.has_value() && nd->count() == g_clock;
    } else {
      model.shards[t].clear_posted = true;
    }
  }
}

// Engine::for_each_pending(s): threads and refusals as clear(). It settles the shard, then visits
// each timer pending between runs there once, with its deadline. The visitor, as the input says,
// only looks, or cancels or moves the timer it visits (posted, so the walk's lists stay as they
// are), reads its deadline, tries what a walk refuses, or throws, which leaves the walk.
void ShardOps::walk_shard(std::size_t s) {
  EngineModel& model = run_.model;
  TICKWHEEL_FUZZ_TRACE("for_each_pending(%zu)", s);
  auto walk = [&](auto&& each) { return run_.engine->for_each_pending(s, each); };
  if (refused(
          s, [&] { static_cast<void>(walk([](tickwheel::Timer, Nanos) {})); },
          "for_each_pending() of a shard that does not exist did not throw out_of_range",
          "for_each_pending() from a thread not the shard's, or from a walk of it, was not refused"))
    return;
  ShardModel& m = model.shards[s];
  model.settle(s);
  std::map<std::uint64_t, std::uint32_t> pending;  // by raw value
  for (const auto& [due, set] : m.linked) {
    for (std::uint32_t serial : set) pending.emplace(model.recs.at(serial).handle.raw(), serial);
  }
  const bool acts = (run_.in.u8() & 1) != 0;  // a byte per visit says what the visitor does, or none
  std::set<std::uint32_t> seen;
  std::size_t n = 0;
  bool threw = false;
  m.walking = true;
  try {
    n = walk([&](tickwheel::Timer t, Nanos deadline) {
      const auto it = pending.find(t.raw());
      check(it != pending.end(), "for_each_pending() visited a timer not pending on the shard", lu(t.raw()));
      const std::uint32_t serial = it->second;
      check(seen.insert(serial).second, "for_each_pending() visited a timer twice", serial);
      check(t && t.shard() == s && t.is_pending(), "a visited timer's handle is not a pending one", serial);
      check(model.deadline_ok(model.recs.at(serial), deadline.count()),
            "for_each_pending() gave a deadline the model does not", deadline.count(),
            model.ns_of(model.recs.at(serial).due));
      if (acts) visit(s, serial, t, deadline);
    });
  } catch (const Thrown&) {
    threw = true;
  }
  m.walking = false;
  TICKWHEEL_FUZZ_TRACE("  -> visited %zu of %zu%s", seen.size(), pending.size(), threw ? ", then threw" : "");
  if (!threw) {
    check(n == seen.size() && seen.size() == pending.size(),
          "for_each_pending() did not visit every pending timer once", static_cast<long long>(n),
          static_cast<long long>(pending.size()));
  }
}

// What a walk's visitor does, by a byte of the input: cancel or move the timer it visits, read its
// deadline, try clear(), for_each_pending() and poll() of the shard (all refused), throw, or post a
// clear (posted: the walk goes on).
void ShardOps::visit(std::size_t s, std::uint32_t serial, const tickwheel::Timer& t, Nanos deadline) {
  Engine& engine = *run_.engine;
  const std::uint8_t what = run_.in.u8();
  switch (what % 8) {
    case 1: run_.handles.cancel(serial, 0, &t); break;
    case 2: run_.handles.reschedule(serial, what >> 4, &t); break;
    case 3: {
      const std::optional<Nanos> when = t.deadline();
      check(when && *when == deadline, "deadline() inside a walk is not what the walk gave", serial);
      break;
    }
    case 4: {
      const bool refused = throws<std::logic_error>([&] { static_cast<void>(engine.clear(s)); }) &&
                           throws<std::logic_error>([&] {
                             static_cast<void>(engine.for_each_pending(s, [](tickwheel::Timer, Nanos) {}));
                           }) &&
                           throws<std::logic_error>([&] { static_cast<void>(engine.poll(s)); });
      check(refused,
            "clear(), for_each_pending() or poll() of a shard from its walk's visitor was not refused");
      break;
    }
    case 5: throw Thrown{};
    case 6: post_clear(static_cast<std::uint8_t>(what & 0x0C), s); break;
    default: break;
  }
}

// Engine::own_shard / release_shard (byte bit 3), from the top level: the fuzz thread becomes a
// shard's owner, or lets it go.
void ShardOps::op_own() {
  EngineModel& model = run_.model;
  const std::uint8_t b = run_.in.u8();
  const std::size_t s = run_.pick_shard(b);
  const bool release = (b & 0x08) != 0;
  TICKWHEEL_FUZZ_TRACE("%s(%zu)", release ? "release_shard" : "own_shard", s);
  auto call = [&] { release ? run_.engine->release_shard(s) : run_.engine->own_shard(s); };
  if (s >= run_.config.shards) {
    check(throws<std::out_of_range>(call), "own_shard() or release_shard() of a shard that does not exist");
    return;
  }
  if (release ? model.owner != s : model.stopped || (model.owner && *model.owner != s)) {
    check(throws<std::logic_error>(call),
          "release_shard() of a shard not owned, or own_shard() after stop() or of a second shard, was not "
          "refused",
          static_cast<long long>(s));
    return;
  }
  if (!release && model.owner != s) model.shards[s].loop_now = std::max(model.shards[s].loop_now, g_clock);
  call();
  model.owner = release ? std::nullopt : std::optional<std::size_t>(s);
}

}  // namespace tickwheel::fuzz::engine
