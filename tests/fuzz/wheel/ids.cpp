// tests/fuzz/wheel/ids.cpp — picking ids, and the TimerId API against the model.
#include "wheel/ids.hpp"

#include "tickwheel/status.hpp"
#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

TimerId IdOps::pick() {
  const WheelModel& model = run_.model;
  Bytes& in = run_.in;
  const std::uint8_t kind = in.u8();
  switch (kind % 8) {
    case 3:
      if (!model.dead.empty()) return model.dead[in.u8() % model.dead.size()];
      break;
    case 4: return TimerId{};
    case 5: return last_failure;
    case 6: {
      const bool from_live = !model.live.empty() && (model.dead.empty() || (kind & 0x10) != 0);
      if (!from_live && model.dead.empty()) break;
      const TimerId real = from_live ? model.timers.at(model.live[in.u16() % model.live.size()]).id
                                     : model.dead[in.u8() % model.dead.size()];
      const std::uint64_t step = static_cast<std::uint64_t>(1 + in.u8() % 4) << 32;
      return TimerId::from_raw((kind & 0x20) != 0 ? real.raw() + step : real.raw() - step);
    }
    case 7: return TimerId::from_raw(in.u64());
    default: break;
  }
  if (model.live.empty()) return TimerId::from_raw(in.u64());
  return model.timers.at(model.live[in.u16() % model.live.size()]).id;
}

void IdOps::op_ids() {
  const WheelModel& model = run_.model;
  Bytes& in = run_.in;
  const std::uint8_t kind = in.u8();
  TimerId id;
  if (kind % 4 == 0 && !model.live.empty()) {
    id = model.timers.at(model.live[in.u16() % model.live.size()]).id;
  } else if (kind % 4 == 1 && !model.dead.empty()) {
    id = model.dead[in.u8() % model.dead.size()];
  } else if (kind % 4 == 2) {
    id = last_failure;
  }
  check(TimerId::from_raw(id.raw()) == id, "from_raw(raw()) is not the id");
  check((id.status() == Status::ok) == static_cast<bool>(id), "an id's status and truth disagree");
  check(TimerId{}.status() == Status::no_timer && !TimerId{}, "a default id is not an empty no_timer id");
  if (id) {
    check(checked(id) == id, "checked() changed a good id");
  } else {
    check(checked_throws(id), "checked() on a false id did not throw ScheduleError with its status");
  }
}

void IdOps::check_failed(TimerId id) {
  last_failure = id;
  check(!run_.wheel->cancel(id), "cancel of a failed id returned true");
  check(checked_throws(id), "checked() on a failed id did not throw ScheduleError with its status");
}

bool IdOps::checked_throws(TimerId id) {
  bool threw = false;
  try {
    static_cast<void>(checked(id));
  } catch (const ScheduleError& e) {
    threw = e.status() == id.status();
  }
  return threw;
}

}  // namespace tickwheel::fuzz::wheel
