// tests/fuzz/engine/raw_values.cpp — timer_from_raw() against the model.
#include "engine/raw_values.hpp"

#include "engine/run.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::fuzz::engine {

// Byte `how` % 8 picks the value: 0 none (0 and all ones), 1 a timer's own, 2 another state of its
// lifetime, 3 another lifetime of its node, 4 a locator never numbered, 5 random, 6 this generation
// with another timer's node, 7 generation 0.
void RawValues::op_raw() {
  const EngineModel& model = run_.model;
  Bytes& in = run_.in;
  const std::uint8_t how = in.u8();
  if (model.serials.empty() || how % 8 == 0) {
    check(tickwheel::Timer{}.raw() == 0 && run_.schedules.last_failure.raw() == 0,
          "raw() of an empty handle is not 0");
    check_raw(0, Named::nothing);
    check_raw(~std::uint64_t{0}, Named::nothing);
    return;
  }
  const Rec& r = model.recs.at(run_.any_timer());
  const std::uint64_t raw = r.handle.raw();
  const tickwheel::Timer copy = r.handle;
  check(raw != 0 && copy.raw() == raw, "a good handle's raw() is 0, or not its copy's", lu(raw));
  constexpr std::uint64_t kLocator = 0xFFFF'FFFFULL;
  switch (how % 8) {
    case 1: check_raw(raw, Named::node); break;  // the timer it names, in whatever state it is now
    case 2: {                                    // another state of the same lifetime
      const std::uint64_t state = 1 + in.u8() % 3U;
      check_raw(raw ^ (state << 32), Named::either);
      break;
    }
    case 3: {  // another lifetime of the node: the one it holds now, or none
      const std::uint64_t lives = std::uint64_t{4} * (1 + in.u8() % 8U);
      check_raw((in.u8() & 1) != 0 ? raw + (lives << 32) : raw - (lives << 32), Named::either);
      break;
    }
    case 4: {  // a locator in the last chunk, never numbered (it would take 2^32 nodes)
      const std::uint64_t node = in.u16() & 0xFFFU;
      check_raw((raw & ~kLocator) | 0xFFFF'F000ULL | node, Named::nothing);
      break;
    }
    case 5: check_raw(in.u64(), Named::either); break;
    case 6: {  // this generation with another timer's node
      const Rec& o = model.recs.at(run_.any_timer());
      check_raw((raw & ~kLocator) | (o.handle.raw() & kLocator), Named::either);
      break;
    }
    default: check_raw(raw & kLocator, Named::either); break;  // generation 0, no handle's
  }
}

// timer_from_raw(raw): a handle that answers as the timer the value names (pending() iff the model
// has a timer pending with exactly that raw value), or an empty one; a handle that names no
// pending timer cancels, moves and reads nothing.
void RawValues::check_raw(std::uint64_t raw, Named named) {
  const EngineModel& model = run_.model;
  tickwheel::Timer t = run_.engine->timer_from_raw(raw);
  std::uint32_t live = 0;  // the timer pending with that raw value, if any
  for (const auto& [serial, r] : model.recs) {
    if (EngineModel::is_pending(r) && r.handle.raw() == raw) live = serial;
  }
  TICKWHEEL_FUZZ_TRACE("timer_from_raw(%llx) -> %d (names #%u)", ull(raw), static_cast<bool>(t), live);
  if (!t) {
    check(named != Named::node && live == 0, "timer_from_raw() of a timer's raw value is empty", lu(raw));
    check(t.status() == Status::no_timer, "an empty handle from timer_from_raw() is not no_timer", lu(raw));
    ScheduleOps::check_empty(t);
    return;
  }
  check(named != Named::nothing, "timer_from_raw() of a value that names no node gave a handle", lu(raw));
  check(t.status() == Status::ok && t.raw() == raw && t.shard() < run_.config.shards,
        "timer_from_raw(): the handle's status, raw() or shard", lu(raw));
  check(t.is_pending() == (live != 0),
        "timer_from_raw(): pending() is not whether the value names a pending timer", lu(raw), live);
  if (live != 0) {
    check(t.shard() == model.recs.at(live).shard, "timer_from_raw(): the shard is not the timer's", live);
    return;
  }
  check(!t.cancel() && !t.reschedule_after(Nanos(0)) && !t.is_pending(),
        "a stale or forged handle from timer_from_raw() cancelled or moved something", lu(raw));
  check(!t.deadline(), "deadline() of a stale or forged handle has a value", lu(raw));
}

}  // namespace tickwheel::fuzz::engine
