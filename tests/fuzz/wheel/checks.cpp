// tests/fuzz/wheel/checks.cpp — the checks after every operation.
#include "wheel/checks.hpp"

#include <optional>

#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void WheelChecks::check_all() {
  const WheelModel& model = run_.model;
  const Wheel& wheel = *run_.wheel;
  const auto pending = static_cast<long long>(model.timers.size());
  check(wheel.pending_count() == model.timers.size(), "pending()",
        static_cast<long long>(wheel.pending_count()), pending);
  check(run_.callbacks.alive.size() == model.timers.size(), "callables alive are not the pending timers",
        static_cast<long long>(run_.callbacks.alive.size()), pending);
  check(wheel.now().count() == model.now, "now()");
  check_stats();
  check_next_deadline();
}

void WheelChecks::check_stats() {
  const WheelModel& model = run_.model;
  const WheelStats s = run_.wheel->stats();
  check(s.scheduled == model.scheduled, "stats().scheduled", lu(s.scheduled), lu(model.scheduled));
  check(s.rejected == model.rejected, "stats().rejected", lu(s.rejected), lu(model.rejected));
  check(s.cancelled == model.cancelled, "stats().cancelled", lu(s.cancelled), lu(model.cancelled));
  check(s.fired == model.fired, "stats().fired", lu(s.fired), lu(model.fired));
  check(s.rearmed == model.rearmed, "stats().rearmed", lu(s.rearmed), lu(model.rearmed));
  check(s.skipped == model.skipped, "stats().skipped", lu(s.skipped), lu(model.skipped));
  check(s.passes <= model.passes, "stats().passes (at most one per call)", lu(s.passes), lu(model.passes));
  check(s.rescheduled == model.rescheduled, "stats().rescheduled", lu(s.rescheduled), lu(model.rescheduled));
  check(s.scheduled + s.rearmed == s.fired + s.skipped + s.cancelled + run_.wheel->pending_count(),
        "scheduled + rearmed != fired + skipped + cancelled + pending");
}

void WheelChecks::check_next_deadline() {
  const WheelModel& model = run_.model;
  const std::optional<Nanos> nd = run_.wheel->next_deadline();
  if (model.timers.empty()) {
    check(!nd, "next_deadline() has a value with nothing pending", nd ? nd->count() : 0);
    return;
  }
  check(nd.has_value(), "next_deadline() is nullopt with timers pending",
        static_cast<long long>(model.timers.size()));
  if (!model.late.empty() || !model.due.empty() || model.slots.count(model.P) != 0) {
    check(nd->count() == model.now, "next_deadline() is not now() while timers wait to run", nd->count(),
          model.now);
    return;
  }
  // Every upper-level slot starts on a multiple of the level-1 unit after P, so before the first
  // such boundary the answer is exact; beyond it, a lower bound.
  const std::uint64_t earliest = model.slots.begin()->first;
  const std::int64_t lo = static_cast<std::int64_t>(model.P) * model.tick;
  const std::int64_t hi = static_cast<std::int64_t>(earliest) * model.tick;
  check(nd->count() > lo && nd->count() <= hi, "next_deadline() is not in (processing tick, earliest due]",
        nd->count(), hi);
  const std::uint64_t unit = std::uint64_t{1} << Wheel::kLevelBits;
  if (earliest <= (model.P / unit + 1) * unit)
    check(nd->count() == hi, "next_deadline() is not the earliest due", nd->count(), hi);
}

}  // namespace tickwheel::fuzz::wheel
