// tests/fuzz/wheel/model.hpp — the wheel target's reference model of the contract in wheel.hpp.
//
// Time is the integer tick. The model keeps every pending timer where the contract says the wheel
// holds it:
//   - `wheel`: due at tick `due`, which is after the tick the wheel was processing when it was
//     linked. A timer scheduled for a tick at or before that one goes to
//   - `due`: runs at the start of the next advance() call, never in the call that linked it
//     ("a timer scheduled at or before the tick being processed ... runs at the start of the next
//     call"; a periodic timer re-armed at or before the call's now waits the same way). At the
//     start of each call they become
//   - `late`: run first in this call, in no particular order, before any tick.
// P is the tick being processed, T the tick of the call's now. A call runs `late`, then the ticks
// from P to T in order, each tick's timers in any order. The model follows the wheel in lockstep:
// each callback must belong to the group the model is at, or every timer left in that group (and
// in the groups in between) must be one the contract says the pass drops without a callback (a
// fixed-rate Misfire::skip timer a whole period behind, counted in WheelStats::skipped).
// Re-arms follow the documented rules exactly: fixed rate on the grid d, d + p, ... (catch_up: the
// next grid point even if already past; fire_once_now and skip: the first grid point after now),
// fixed delay one period after the call's now; all clamped to the horizon.
//
// Where the wheel stops. A call that runs `limit` callbacks (or whose callback throws) leaves the
// rest for the next call, and does not lag behind time that holds nothing due: it stops in the
// group it was in if anything is left there or anything waits in `due`, else at the first later
// tick with timers (or at T). A cancel that empties the place where a stopped wheel waits lets it
// step on in the same way. The model does the same, since later placements (`due` or `wheel`)
// and next_deadline() depend on it.
//
// The one weaker spot: drops the model cannot see. Order within a tick is unspecified, so when a
// callback cancels a skip timer of the group being run, the pass may have dropped it (counted in
// skipped and rearmed) before the callback, or not; and when a call stops inside a group that
// holds skip timers, the pass may have dropped any of them before it stopped. The model takes
// the number of such drops from WheelStats::skipped (each is also one re-arm), checked against
// how many there can be. Where the stopped-in group's timers are concerned, none or all settles
// where they are; otherwise the model cancels exactly those timers (a pending periodic timer
// cancels with true wherever it is), so it stays exact at the cost of losing them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "fuzz_support.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::fuzz::wheel {

// The most timers a wheel can hold: WheelOptions::max_pending's upper bound, and the limit when it
// is 0.
inline constexpr std::uint64_t kPoolLimit = (std::uint64_t{1} << 32) - 1;

enum class Place : std::uint8_t { wheel, late, due, running };

// A pending timer, as the model holds it.
struct ModelTimer {
  TimerId id;
  std::uint64_t due = 0;  // the tick the wheel holds it for
  Place place = Place::wheel;
  bool periodic = false;
  PeriodicRule rule;
  std::size_t pos = 0;  // index in WheelModel::live
};

struct WheelModel {
  // A schedule the wheel accepted: the timer is pending from now, linked for `due`: in the due slot
  // if that is at or before the tick being processed, else in the wheel.
  void add(std::uint32_t serial, ModelTimer t);
  // The pending timer an id names (0: none).
  std::uint32_t find(TimerId id) const;

  void place(std::uint32_t serial, ModelTimer& t, Place where);
  void unplace(std::uint32_t serial, const ModelTimer& t);
  void forget(std::uint32_t serial);
  void relink(std::uint32_t serial, ModelTimer& t, std::uint64_t next);

  void step_on_after_cancel();
  void step_to_next_timers();

  bool skip_due(const ModelTimer& t) const { return t.periodic && t.rule.skips(t.due, T); }
  void skip(std::uint32_t serial);
  void drop(std::uint32_t serial);
  void pass_over(const std::set<std::uint32_t>& group, const char* what);
  void reach(std::uint32_t serial, const ModelTimer& t);
  void begin_call(std::int64_t target, std::size_t call_limit);

  std::int64_t tick = 1;
  std::uint64_t max_tick = 0;
  std::size_t max_pending = 0;

  std::int64_t now = 0;  // the wheel's now, in ns
  std::uint64_t P = 0;   // the tick being processed (where the wheel stands)
  std::uint64_t T = 0;   // the tick of the last advance()'s now

  std::map<std::uint32_t, ModelTimer> timers;  // pending, by serial
  std::map<std::uint64_t, std::uint32_t> by_raw;
  std::vector<std::uint32_t> live;                         // the serials of timers, for picking one
  std::map<std::uint64_t, std::set<std::uint32_t>> slots;  // Place::wheel, by due tick; no empty sets
  std::set<std::uint32_t> late;
  std::set<std::uint32_t> due;
  std::vector<TimerId> dead;  // ids of fired and cancelled timers
  std::size_t dead_next = 0;

  std::uint64_t rescheduled = 0;
  std::uint64_t scheduled = 0, rejected = 0, cancelled = 0, fired = 0, rearmed = 0, skipped = 0, passes = 0;

  // The advance() call in progress.
  bool in_call = false;
  bool late_phase = false;  // still running the late timers
  std::size_t limit = 0;
  std::size_t ran = 0;
  std::uint64_t cancelled_skips = 0;  // skip timers of the group being run, cancelled by callbacks
};

}  // namespace tickwheel::fuzz::wheel
