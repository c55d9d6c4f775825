// tests/fuzz/engine/schedules.hpp — the schedule calls: schedule_after / schedule_at /
// schedule_after_on / schedule_at_on (a good shard or one past the last; absolute deadlines from
// zero or near the clock) and schedule_every / schedule_every_on (good and bad periods, fixed rate
// and fixed delay, each Misfire policy, with and without an initial delay), from the top level and
// from callbacks. Each outcome is checked against what the model expects (the shard, admission
// under max_pending_per_shard, the status, the rejected count), and a timer that succeeds is
// recorded where the model says it is: linked at once (a callback's own shard, the owner's shard),
// claimed by the due path, or queued for its shard's next transfer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/model.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

// What a schedule expects, read before it is made: the shard it must land on, if known, whether
// each shard admits one more timer under max_pending_per_shard, and the rejected count.
struct Expect {
  std::optional<std::size_t> target;
  std::vector<bool> admits;
  std::uint64_t rejected = 0;
};

class ScheduleOps {
 public:
  explicit ScheduleOps(EngineRun& run) noexcept : run_(run) {}

  void op_schedule(std::uint8_t op);
  void op_schedule_every(std::uint8_t op);

  // A default or failed handle, anywhere: nothing to cancel, move, ask or name.
  static void check_empty(const tickwheel::Timer& t);

  tickwheel::Timer last_failure;  // the handle of the last schedule that failed

 private:
  std::size_t decode_asked(unsigned kind);
  tickwheel::Timer call(unsigned kind, std::size_t asked, bool absolute, std::int64_t d,
                        std::int64_t deadline, std::uint32_t serial);
  std::int64_t base_for(const Expect& e) const;
  Expect expect(std::size_t asked);
  void no_such_shard(const tickwheel::Timer& t, const Expect& e);
  void record(const tickwheel::Timer& t, std::uint32_t serial, const Expect& e, Rec rec,
              std::int64_t deadline, bool absolute = false);
  bool refused(const tickwheel::Timer& t, const Expect& e, std::uint64_t rejected_now);
  std::size_t landed(const tickwheel::Timer& t, const Expect& e, std::uint64_t rejected_now);
  void link_or_queue(std::uint32_t serial, Rec& r);
  void failed(const tickwheel::Timer& t);

  EngineRun& run_;
  std::uint32_t next_serial_ = 1;
};

}  // namespace tickwheel::fuzz::engine
