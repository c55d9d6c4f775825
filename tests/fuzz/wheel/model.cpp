// tests/fuzz/wheel/model.cpp — the model's bookkeeping: where a timer is placed, how the model's
// pass follows the wheel's, and where a dropped skip timer goes.
#include "wheel/model.hpp"

#include <algorithm>

namespace tickwheel::fuzz::wheel {

void WheelModel::add(std::uint32_t serial, ModelTimer t) {
  t.pos = live.size();
  live.push_back(serial);
  by_raw.emplace(t.id.raw(), serial);
  ModelTimer& rec = timers.emplace(serial, t).first->second;
  place(serial, rec, t.due <= P ? Place::due : Place::wheel);
}

std::uint32_t WheelModel::find(TimerId id) const {
  const auto it = by_raw.find(id.raw());
  return static_cast<bool>(id) && it != by_raw.end() ? it->second : 0;
}

void WheelModel::place(std::uint32_t serial, ModelTimer& t, Place where) {
  t.place = where;
  switch (where) {
    case Place::wheel: slots[t.due].insert(serial); break;
    case Place::late: late.insert(serial); break;
    case Place::due: due.insert(serial); break;
    case Place::running: break;
  }
}

void WheelModel::unplace(std::uint32_t serial, const ModelTimer& t) {
  switch (t.place) {
    case Place::wheel: {
      const auto g = slots.find(t.due);
      g->second.erase(serial);
      if (g->second.empty()) slots.erase(g);
      break;
    }
    case Place::late: late.erase(serial); break;
    case Place::due: due.erase(serial); break;
    case Place::running: break;
  }
}

// The timer is no longer pending: fired (one-shot) or cancelled.
void WheelModel::forget(std::uint32_t serial) {
  ModelTimer& t = timers.at(serial);
  unplace(serial, t);
  const std::uint32_t moved = live.back();
  live[t.pos] = moved;
  timers.at(moved).pos = t.pos;
  live.pop_back();
  by_raw.erase(t.id.raw());
  if (dead.size() < 64) {
    dead.push_back(t.id);
  } else {
    dead[dead_next++ % dead.size()] = t.id;
  }
  timers.erase(serial);
}

// A periodic timer's next period: behind (at or before now) it waits in the due slot.
void WheelModel::relink(std::uint32_t serial, ModelTimer& t, std::uint64_t next) {
  unplace(serial, t);
  t.due = next;
  place(serial, t, next <= T ? Place::due : Place::wheel);
  TICKWHEEL_FUZZ_TRACE("  #%u re-armed for tick %llu (%s)", serial, ull(next),
                       next <= T ? "due slot" : "wheel");
}

// A cancel outside advance() that takes the last timer where a stopped wheel waits (late, due,
// or the tick it stopped at) lets it step on, as a call that ran out of budget would have.
void WheelModel::step_on_after_cancel() {
  if (P == T || !late.empty() || !due.empty() || slots.count(P) != 0) return;
  step_to_next_timers();
}

void WheelModel::step_to_next_timers() {
  const auto next = slots.upper_bound(P);
  P = next != slots.end() && next->first <= T ? next->first : T;
}

void WheelModel::skip(std::uint32_t serial) {
  ++skipped;
  ++rearmed;
  drop(serial);
}

// Where a dropped skip timer goes: the first grid point after now.
void WheelModel::drop(std::uint32_t serial) {
  ModelTimer& t = timers.at(serial);
  TICKWHEEL_FUZZ_TRACE("  #%u skipped (due %llu)", serial, ull(t.due));
  relink(serial, t, t.rule.first_grid_point_after(t.due, T, max_tick));
}

// Every timer of a group the pass has left must be a skip timer: drop it as the pass did.
void WheelModel::pass_over(const std::set<std::uint32_t>& group, const char* what) {
  const std::vector<std::uint32_t> members(group.begin(), group.end());
  for (std::uint32_t s : members) {
    check(skip_due(timers.at(s)), what, s);
    skip(s);
  }
}

// Moves the model's pass on until the group it is at holds `serial`. Every group it leaves must
// hold only skip timers, which the pass dropped.
void WheelModel::reach(std::uint32_t serial, const ModelTimer& t) {
  for (;;) {
    if (late_phase) {
      if (t.place == Place::late) return;
      pass_over(late, "a timer ran before a late timer (due at the start of the call)");
      late_phase = false;
      continue;
    }
    check(t.place == Place::wheel, "a late timer ran after the call went on to the ticks", serial);
    if (t.due == P) return;
    if (const auto g = slots.find(P); g != slots.end()) {
      pass_over(std::set<std::uint32_t>(g->second),
                "out of order: a timer ran before one of an earlier tick");
    }
    const auto next = slots.upper_bound(P);
    check(next != slots.end() && next->first <= T, "a timer ran that the model has not due", serial);
    P = next->first;
  }
}

// An advance() call to `target` begins: the wheel's now moves (never back), and what waited in the
// due slot runs first, late.
void WheelModel::begin_call(std::int64_t target, std::size_t call_limit) {
  now = std::max(now, target);
  T = std::min(static_cast<std::uint64_t>(now / tick), max_tick);
  ++passes;
  TICKWHEEL_FUZZ_TRACE("advance(%lld, limit %lld): T %llu, P %llu", ll(target),
                       static_cast<long long>(call_limit), ull(T), ull(P));
  for (std::uint32_t s : due) {
    timers.at(s).place = Place::late;
    late.insert(s);
  }
  due.clear();
  in_call = true;
  late_phase = true;
  cancelled_skips = 0;
  limit = call_limit;
  ran = 0;
}

}  // namespace tickwheel::fuzz::wheel
