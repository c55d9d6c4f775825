// tests/fuzz/wheel/advance.cpp — advance() against the model.
#include "wheel/advance.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void AdvanceOps::op_advance() {
  const WheelModel& model = run_.model;
  const std::int64_t now = model.now;
  const std::int64_t tick = model.tick;
  Bytes& in = run_.in;
  const std::uint8_t kind = in.u8();
  std::int64_t target = now;
  switch (kind % 8) {
    case 1: target = sat_add(now, sat_mul((kind >> 4) & 7, tick) + in.u8() * (tick / 256)); break;
    case 2: target = sat_add(now, sat_mul(in.u8(), tick)); break;
    case 3: target = sat_add(now, sat_mul(in.u16(), tick)); break;
    case 4: {  // through the upper levels
      const unsigned level = 1 + in.u8() % 4;
      target = sat_add(now, sat_mul(sat_mul(in.u16(), std::int64_t{1} << (Wheel::kLevelBits * level)), tick));
      break;
    }
    case 5: target = now - sat_mul(in.u16(), tick); break;  // time going back: ignored
    case 6: {                                               // as an event loop does
      const std::optional<Nanos> nd = run_.wheel->next_deadline();
      target = nd ? nd->count() : sat_add(now, tick);
      break;
    }
    case 7:
      target =
          (kind & 0x30) == 0 ? kI64Max : sat_add(now, sat_mul(in.u8(), sat_mul(std::int64_t{1} << 24, tick)));
      break;
    default: break;
  }
  advance(target, run_.limit());
}

void AdvanceOps::advance(std::int64_t target, std::size_t limit) {
  WheelModel& model = run_.model;
  model.begin_call(target, limit);
  bool threw = false;
  std::size_t got = 0;
  try {
    got = run_.wheel->advance(Nanos(target), limit);
  } catch (const Thrown&) {
    threw = true;
  }
  model.in_call = false;
  TICKWHEEL_FUZZ_TRACE("  -> ran %zu%s", model.ran, threw ? ", threw" : "");
  check(run_.wheel->now().count() == model.now, "now() after advance() is not the latest now",
        run_.wheel->now().count(), model.now);
  if (!threw)
    check(got == model.ran, "advance() returned a count other than the callbacks run",
          static_cast<long long>(got), static_cast<long long>(model.ran));
  if (!threw && model.ran < limit) {
    finish_call();
  } else {
    stop_call();
  }
}

// A call that ran fewer callbacks than its limit and did not throw went through everything due:
// what is left up to now must be skip timers, dropped.
void AdvanceOps::finish_call() {
  WheelModel& model = run_.model;
  if (model.late_phase) {
    model.pass_over(model.late, "advance() stopped below its limit but left a late timer unrun");
    model.late_phase = false;
  }
  for (;;) {
    if (const auto g = model.slots.find(model.P); g != model.slots.end()) {
      model.pass_over(std::set<std::uint32_t>(g->second),
                      "advance() stopped below its limit but left a due timer unrun");
    }
    const auto next = model.slots.upper_bound(model.P);
    if (next == model.slots.end() || next->first > model.T) break;
    model.P = next->first;
  }
  model.P = model.T;
  count_unseen_drops(model.cancelled_skips, "more skips than the model allows");
}

// A call cut short by its limit or a throw. First the skip timers of the group it stopped in,
// which the pass may or may not have dropped (see model.hpp), then where it stopped.
void AdvanceOps::stop_call() {
  WheelModel& model = run_.model;
  std::vector<std::uint32_t> maybe;
  const std::set<std::uint32_t>* group = nullptr;
  if (model.late_phase) {
    group = &model.late;
  } else if (const auto g = model.slots.find(model.P); g != model.slots.end()) {
    group = &g->second;
  }
  if (group != nullptr) {
    for (std::uint32_t s : *group) {
      if (model.skip_due(model.timers.at(s))) maybe.push_back(s);
    }
  }
  const std::uint64_t delta = count_unseen_drops(model.cancelled_skips + maybe.size(),
                                                 "more skips than skip timers the pass could have dropped");
  // How many of `maybe` were dropped: the rest of delta are cancelled ones.
  const std::uint64_t least = delta > model.cancelled_skips ? delta - model.cancelled_skips : 0;
  const std::uint64_t most = std::min<std::uint64_t>(delta, maybe.size());
  TICKWHEEL_FUZZ_TRACE("  stopped short at P %llu (%s): %llu..%llu of %zu skip timers there dropped",
                       ull(model.P), model.late_phase ? "late" : "tick", ull(least), ull(most), maybe.size());
  const bool known = least == most && (least == 0 || least == maybe.size());
  if (known && least != 0) {
    for (std::uint32_t s : maybe) model.drop(s);
  }
  // The wheel stays where it stopped if anything is left there or waits in the due slot;
  // otherwise it steps on to the first tick with timers, or to now.
  if (!(model.late_phase && !model.late.empty()) && model.slots.count(model.P) == 0 && model.due.empty())
    model.step_to_next_timers();
  if (!known) {
    for (std::uint32_t s : maybe) {
      check(run_.cancels.cancel(model.timers.at(s).id, s),
            "cancel of a pending periodic timer returned false", s);
      run_.cancels.cancelled(s);
      model.step_on_after_cancel();
    }
  }
}

// Adds the drops the model could not see to the counters: each drop is one skip and one re-arm.
// `unseen` is at most how many there can be.
std::uint64_t AdvanceOps::count_unseen_drops(std::uint64_t unseen, const char* what) {
  WheelModel& model = run_.model;
  const std::uint64_t delta = run_.wheel->stats().skipped - model.skipped;
  check(delta <= unseen, what, static_cast<long long>(delta), static_cast<long long>(unseen));
  model.skipped += delta;
  model.rearmed += delta;
  return delta;
}

}  // namespace tickwheel::fuzz::wheel
