// tests/fuzz/fuzz_support.hpp — what the two fuzz targets share: the byte reader that turns a
// fuzzer input into decisions, the loop over its operations, the callable their timers carry, what
// a callback throws, the failure report, time arithmetic done the slow, obvious way, and the
// periodic timer's re-arm rules written out from wheel.hpp (the reference models must not borrow
// the library's own helpers, or a shared bug would cancel out).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "tickwheel/wheel.hpp"

namespace tickwheel::fuzz {

using Nanos = std::chrono::nanoseconds;

// Reads an input from both ends: operations from the front, and the decisions taken inside
// callbacks from the back. Keeping the two apart makes inputs stable under mutation: a change
// that makes one more callback run shifts only the callback decisions, not every later operation.
// Past the end (the two cursors met) every read returns 0, which each decoder maps to its most
// ordinary choice, so every byte string is a valid input.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) noexcept : data_(data), front_(0), back_(size) {}

  bool empty() const noexcept { return front_ >= back_; }

  std::uint8_t u8() noexcept {
    if (empty()) return 0;
    return from_back_ ? data_[--back_] : data_[front_++];
  }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint64_t u64() noexcept {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{u8()} << (8 * i);
    return v;
  }

  // While one of these lives, reads come from the back: a callback's decisions use the same
  // decoders as the operations without taking bytes from the operation stream.
  class FromBack {
   public:
    explicit FromBack(Bytes& b) noexcept : b_(b), was_(b.from_back_) { b_.from_back_ = true; }
    ~FromBack() { b_.from_back_ = was_; }
    FromBack(const FromBack&) = delete;
    FromBack& operator=(const FromBack&) = delete;

   private:
    Bytes& b_;
    bool was_;
  };

 private:
  const std::uint8_t* data_;
  std::size_t front_;
  std::size_t back_;
  bool from_back_ = false;
};

// The callable every timer of a target carries, 16 bytes so that a periodic timer can carry it
// too. It stands for one callable from its creation to its destruction, handed on by the move
// constructor, so the model sees when the library destroys a callable, and a second destruction.
// `Run` is the target's driver, which befriends Fire<Run>: Fire calls its born(serial) when made,
// on_fire(serial) when run, and died(serial) when the last owner is destroyed.
template <class Run>
class Fire {
 public:
  Fire(Run* run, std::uint32_t serial) noexcept : run_(run), serial_(serial), owner_(true) {
    static_assert(sizeof(Fire) <= 16, "must fit a periodic timer's node");
    run_->born(serial_);
  }
  Fire(Fire&& o) noexcept : run_(o.run_), serial_(o.serial_), owner_(std::exchange(o.owner_, false)) {}
  Fire(const Fire&) = delete;
  Fire& operator=(const Fire&) = delete;
  Fire& operator=(Fire&&) = delete;
  ~Fire() {
    if (owner_) run_->died(serial_);
  }
  void operator()() { run_->on_fire(serial_); }

 private:
  Run* run_;
  std::uint32_t serial_;
  bool owner_;
};

// What a callback throws when the input says so.
struct Thrown {};

// A null function pointer, which every schedule call must refuse with Status::null_callback.
inline constexpr void (*kNullFn)() = nullptr;

// Values for a check's report (long long) and for a trace's %llu.
inline long long ll(std::int64_t v) noexcept { return static_cast<long long>(v); }
inline long long lu(std::uint64_t v) noexcept { return static_cast<long long>(v); }
inline unsigned long long ull(std::uint64_t v) noexcept { return static_cast<unsigned long long>(v); }

// A disagreement between the library and its reference model: print it and abort, which
// libFuzzer reports as a crash (and saves the input), and which fails a replay test.
[[noreturn]] inline void fail(const char* what, long long a = 0, long long b = 0) noexcept {
  std::fprintf(stderr, "tickwheel fuzz: model mismatch: %s (%lld, %lld)\n", what, a, b);
  std::fflush(stderr);
  std::abort();
}

inline void check(bool ok, const char* what, long long a = 0, long long b = 0) noexcept {
  if (!ok) fail(what, a, b);
}

// TICKWHEEL_FUZZ_TRACE=1 makes a target print each operation and what the model expects, to
// read a failing input's story (run the replay binary or the fuzzer on that one file).
inline bool tracing() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("TICKWHEEL_FUZZ_TRACE");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return on;
}

#define TICKWHEEL_FUZZ_TRACE(...)        \
  do {                                   \
    if (::tickwheel::fuzz::tracing()) {  \
      std::fprintf(stderr, __VA_ARGS__); \
      std::fputc('\n', stderr);          \
    }                                    \
  } while (false)

// Runs the operations of an input, after `run` has read its options: each front byte is one
// operation (Run::step), after which the target checks everything it can (Run::check_invariants).
template <class Run>
void run_ops(Bytes& in, Run& run) {
  while (!in.empty()) {
    run.step(in.u8());
    run.check_invariants();
  }
}

// The end of a run: the library object goes, and must destroy every callable it still holds without
// running it; `destroying` tells the target's callbacks and died() so meanwhile.
template <class Library>
void destroy_checking_callables(std::unique_ptr<Library>& library, bool& destroying,
                                const std::set<std::uint32_t>& alive, const char* what) {
  destroying = true;
  library.reset();
  destroying = false;
  check(alive.empty(), what, static_cast<long long>(alive.size()));
}

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

inline std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kI64Max : kI64Min;
  return r;
}

inline std::int64_t sat_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? kI64Min : kI64Max;
  return r;
}

// The tick a deadline rounds up to, as wheel.hpp states it: zero for a deadline at or before
// zero, else ceil(deadline / tick), and never past the last tick a Nanos can hold.
inline std::uint64_t due_tick(std::int64_t deadline_ns, std::int64_t tick_ns) noexcept {
  if (deadline_ns <= 0) return 0;
  const auto d = static_cast<std::uint64_t>(deadline_ns);
  const auto t = static_cast<std::uint64_t>(tick_ns);
  const std::uint64_t up = d / t + (d % t != 0 ? 1 : 0);
  const std::uint64_t last = static_cast<std::uint64_t>(kI64Max) / t;
  return up < last ? up : last;
}

// The longest period schedule_every accepts: 2^60 - 1 ns.
constexpr std::int64_t kMaxPeriod = (std::int64_t{1} << 60) - 1;

// A period for schedule_every, good and bad: whole ticks (short, long, spanning upper levels),
// not whole ticks (fixed delay only), zero and negative, the longest one and just past it, anything.
inline std::int64_t decode_period(Bytes& in, std::int64_t tick) noexcept {
  const std::uint8_t kind = in.u8();
  switch (kind % 8) {
    case 0: return (1 + ((kind >> 4) & 7)) * tick;
    case 1: return (1 + std::int64_t{in.u8()}) * tick;
    case 2: return sat_mul(1 + std::int64_t{in.u16()}, tick);
    case 3: {
      const unsigned level = 1 + in.u8() % 4;
      return sat_mul(1 + std::int64_t{in.u8() % 4},
                     sat_mul(std::int64_t{1} << (Wheel::kLevelBits * level), tick));
    }
    case 4: return sat_mul(std::int64_t{in.u8() % 8}, tick) + 1 + in.u16() % (tick - 1);  // not whole ticks
    case 5: return -static_cast<std::int64_t>(in.u8());
    case 6: return kMaxPeriod + in.u8() % 3;  // the longest period and just past it
    default: return static_cast<std::int64_t>(in.u64());
  }
}

// A periodic timer's schedule and the rules of wheel.hpp (Cadence, Misfire) for its next run, as
// both models apply them. Times are ticks, except the fixed-delay origin, which is nanoseconds.
struct PeriodicRule {
  Cadence cadence = Cadence::fixed_rate;
  Misfire misfire = Misfire::fire_once_now;
  std::int64_t period_ns = 0;
  std::uint64_t period_ticks = 0;  // fixed rate: the period in whole ticks

  // Whether schedule_every refuses the period with Status::bad_period.
  static bool refused(std::int64_t period_ns, Cadence cadence, std::int64_t tick_ns) noexcept {
    return period_ns <= 0 || period_ns > kMaxPeriod ||
           (cadence == Cadence::fixed_rate && period_ns % tick_ns != 0);
  }

  // A fixed-rate Misfire::skip timer whose run, due at tick `due`, is a whole period behind the
  // now of the advance() that reaches it (tick T): that run is dropped, not run.
  bool skips(std::uint64_t due, std::uint64_t T) const noexcept {
    return cadence == Cadence::fixed_rate && misfire == Misfire::skip && due <= T && T - due >= period_ticks;
  }

  // The first tick of the grid due, due + p, ... after T, clamped to the horizon. due <= T.
  std::uint64_t first_grid_point_after(std::uint64_t due, std::uint64_t T,
                                       std::uint64_t max_tick) const noexcept {
    const std::uint64_t point = due + ((T - due) / period_ticks + 1) * period_ticks;
    return point < max_tick ? point : max_tick;
  }

  // The run after the one for tick `due`, re-armed while the wheel's now is tick T: fixed delay one
  // period after `ran_until` (nanoseconds) rounded up to the tick; fixed rate the next grid point,
  // or, for fire_once_now and skip when that point is not after T, the first one after T.
  std::uint64_t next_run(std::uint64_t due, std::uint64_t T, std::int64_t ran_until, std::int64_t tick_ns,
                         std::uint64_t max_tick) const noexcept {
    if (cadence == Cadence::fixed_delay) return due_tick(sat_add(ran_until, period_ns), tick_ns);
    const std::uint64_t next = due + period_ticks;
    if (next > T || misfire == Misfire::catch_up) return next < max_tick ? next : max_tick;
    return first_grid_point_after(due, T, max_tick);
  }
};

// A schedule_every call as both targets decode it: the period (decode_period), then a flags byte:
// bit 0 the cadence (set: fixed delay), bits 1-2 the misfire policy, bit 7 an initial delay (then
// read by the target's own `delay`), and bits 3-6 all set a null function pointer instead of a
// callable.
struct PeriodicCall {
  std::int64_t period_ns = 0;
  PeriodicOptions options;
  bool null_fn = false;

  template <class Delay>
  static PeriodicCall decode(Bytes& in, std::int64_t tick_ns, Delay delay) {
    PeriodicCall c;
    c.period_ns = decode_period(in, tick_ns);
    const std::uint8_t flags = in.u8();
    c.options.cadence = (flags & 1) != 0 ? Cadence::fixed_delay : Cadence::fixed_rate;
    c.options.misfire = static_cast<Misfire>((flags >> 1) % 3);
    if ((flags & 0x80) != 0) c.options.initial_delay = Nanos(delay());
    c.null_fn = (flags & 0x78) == 0x78;
    return c;
  }

  // Whether schedule_every refuses the period with Status::bad_period.
  bool refused(std::int64_t tick_ns) const noexcept {
    return PeriodicRule::refused(period_ns, options.cadence, tick_ns);
  }
  // The delay to the first run, as wheel.hpp states it: the initial delay if set (a negative one
  // counts as 0), else one period.
  std::int64_t first_delay() const noexcept {
    return options.initial_delay ? std::max<std::int64_t>(options.initial_delay->count(), 0) : period_ns;
  }
  // The rules of the runs after the first, for a period schedule_every accepts.
  PeriodicRule rule(std::int64_t tick_ns) const noexcept {
    return PeriodicRule{.cadence = options.cadence,
                        .misfire = options.misfire,
                        .period_ns = period_ns,
                        .period_ticks = static_cast<std::uint64_t>(period_ns / tick_ns)};
  }
};

}  // namespace tickwheel::fuzz
