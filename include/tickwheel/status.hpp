// tickwheel/status.hpp — why a schedule failed, as a value, and the one throwing convenience.
//
// The hot path never throws: a schedule that cannot be honoured returns a TimerId that tests false
// and carries one of these reasons. Code that prefers exceptions wraps the call in
// `tickwheel::checked(...)`, which throws ScheduleError with the reason in its message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

namespace tickwheel {

// Outcome of a schedule. Every value but `ok` is a failure that left the timer set untouched.
enum class Status : std::uint8_t {
  ok = 0,
  no_timer,             // a default-constructed TimerId: it never named a timer
  max_pending_reached,  // WheelOptions::max_pending timers are pending; nothing was scheduled
  out_of_memory,        // the node pool could not grow (address space or the 2^32-node limit)
  stopped,              // Engine: stop() was called; nothing is scheduled any more
  no_such_shard,        // Engine: schedule_after_on() named a shard >= shard_count()
  bad_period,           // schedule_every(): the period is <= 0, longer than 2^60 - 1 ns, or, for a
                        // fixed-rate timer, not a whole number of ticks (the wheel runs timers only
                        // on ticks, and a grid kept in whole ticks never drifts): use
                        // Cadence::fixed_delay or a finer tick
  null_callback,        // the callable is a null function pointer: nothing would run
};

// A short, stable, human-readable name for a status ("max_pending_reached", ...). Any thread.
constexpr std::string_view to_string(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::no_timer: return "no_timer";
    case Status::max_pending_reached: return "max_pending_reached";
    case Status::out_of_memory: return "out_of_memory";
    case Status::stopped: return "stopped";
    case Status::no_such_shard: return "no_such_shard";
    case Status::bad_period: return "bad_period";
    case Status::null_callback: return "null_callback";
  }
  return "unknown";
}

// Thrown only by the `checked()` convenience, never by the engine's own hot path.
class ScheduleError : public std::runtime_error {
 public:
  ScheduleError(Status status, const char* message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

}  // namespace tickwheel
