// engine/wheel/wheel.cpp — the standalone Wheel, compiled: WheelCore with the plain policy, whose code is
// engine/wheel/wheel_impl.hpp, and the Wheel's helpers that are not templates (checked(), the periodic
// schedule word).
#include "tickwheel/wheel.hpp"

#include <cassert>
#include <string>

#include "wheel/wheel_impl.hpp"

namespace tickwheel {

template class detail::WheelCore<detail::PlainPolicy>;

TimerId checked(TimerId id) {
  if (!id) {
    const Status why = id.status();
    std::string message = std::string("tickwheel: schedule failed: ") + std::string(to_string(why));
    if (why == Status::bad_period) {
      message +=
          " (a period must be > 0 and at most 2^60 - 1 ns, and a fixed-rate period a whole "
          "number of ticks: use Cadence::fixed_delay or a finer tick)";
    }
    throw ScheduleError(why, message.c_str());
  }
  return id;
}

namespace detail {

std::uint64_t periodic_meta(Nanos period, const PeriodicOptions& opts, Nanos tick) noexcept {
  using Meta = PeriodicMeta;
  assert(opts.cadence <= Cadence::fixed_delay && opts.misfire <= Misfire::skip);
  if (period.count() <= 0 || static_cast<std::uint64_t>(period.count()) > Meta::kMaxPeriod) return 0;
  if (opts.cadence == Cadence::fixed_rate && period.count() % tick.count() != 0) return 0;
  return Meta::make(static_cast<std::uint64_t>(period.count()), static_cast<unsigned>(opts.cadence),
                    static_cast<unsigned>(opts.misfire));
}

}  // namespace detail

}  // namespace tickwheel
