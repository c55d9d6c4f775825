// stress/driver.cpp — the driver loop, the per-timer bookkeeping and the end-of-run checks.
#include "driver.hpp"

#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "clock.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::stress {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
// The sleep target must be on the clock the harness reads; a larger offset means it is not.
constexpr std::int64_t kMaxClockOffsetNs = 1'000'000;

// Per-timer state, one byte each.
enum : std::uint8_t { kUnscheduled = 0, kPending, kFired, kCancelled };

// The 1-minute load average, or -1 if /proc/loadavg cannot be read.
double read_loadavg() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

rusage read_rusage() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage;
}

std::string format_us(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e3);
  return buf;
}

class Driver {
 public:
  Driver(const Options& options, std::ostream& status);
  Report run();

 private:
  void on_fire(std::uint32_t i) noexcept;
  void cancel_due(std::int64_t now);
  void schedule_due(std::int64_t now);
  std::int64_t next_schedule_time() const noexcept;
  void pass(std::int64_t now);
  void print_status(std::int64_t now);
  void finish();
  std::int64_t round_up_to_tick(std::int64_t t) const noexcept {
    return t <= 0 ? 0 : ((t + tick_ - 1) / tick_) * tick_;
  }

  const Options& opt_;
  std::ostream& status_;
  Report r_;
  Clock clock_;                  // restarted when the run starts: its 0 is the wheel's start
  std::int64_t tick_;
  Wheel wheel_;

  // The plan: the same seed gives the same delays and cancel picks in the same order.
  std::mt19937_64 rng_;
  std::uniform_int_distribution<std::int64_t> delay_;
  std::bernoulli_distribution pick_;
  std::uniform_real_distribution<double> when_;

  // Per timer, indexed by the timer's number (its order of scheduling).
  std::unique_ptr<std::int64_t[]> deadline_;     // ns on the clock's axis
  std::unique_ptr<std::uint64_t[]> id_;          // TimerId::raw()
  std::unique_ptr<std::uint64_t[]> sched_pass_;  // passes completed when it was scheduled
  std::unique_ptr<std::uint8_t[]> state_;        // kUnscheduled .. kCancelled

  // Cancel picks, earliest first: (time to cancel, timer number).
  using CancelEvent = std::pair<std::int64_t, std::uint32_t>;
  struct CancelQueue : std::priority_queue<CancelEvent, std::vector<CancelEvent>, std::greater<>> {
    using priority_queue::priority_queue;
    std::size_t capacity() const noexcept { return c.capacity(); }
  };
  CancelQueue cancels_;
  std::vector<std::uint32_t> cancel_batch_;     // timer numbers of the batch being cancelled
  std::vector<std::uint64_t> cancel_id_;        // their ids
  std::vector<std::uint8_t> cancel_result_;

  // Set by the loop before each advance() and read by the callbacks it runs.
  std::int64_t pass_now_ = -1;       // `now` of the pass running
  std::int64_t prev_pass_now_ = -1;  // `now` of the pass before it

  std::uint64_t next_timer_ = 0;     // timers [0, next_timer_) have had their schedule call
  std::int64_t sched_start_ = 0;
  std::int64_t last_deadline_ = 0;
};

Driver::Driver(const Options& options, std::ostream& status)
    : opt_(options),
      status_(status),
      tick_(options.tick_ns),
      wheel_(WheelOptions{.tick = Nanos(options.tick_ns), .start = Nanos(0), .max_pending = 0}),
      rng_(options.seed),
      delay_(options.delay_min_ns, options.delay_max_ns),
      pick_(options.cancel_share),
      when_(0.0, 1.0),
      deadline_(std::make_unique<std::int64_t[]>(options.timers)),
      id_(std::make_unique<std::uint64_t[]>(options.timers)),
      sched_pass_(std::make_unique<std::uint64_t[]>(options.timers)),
      state_(std::make_unique<std::uint8_t[]>(options.timers)),
      cancel_batch_(options.batch),
      cancel_id_(options.batch),
      cancel_result_(options.batch) {
  r_.options = options;
  r_.min_lateness_ns = kNever;

  // Reserve the cancel queue for the expected picks plus 1 % (it grows if the draw exceeds that).
  std::vector<CancelEvent> storage;
  storage.reserve(static_cast<std::size_t>(static_cast<double>(options.timers) *
                                           std::min(1.0, options.cancel_share * 1.01)) + 16);
  cancels_ = CancelQueue(std::greater<>{}, std::move(storage));

  r_.clock_read_ns = Clock::measure_read_cost();
  r_.clock_monotonic_offset_ns = clock_.monotonic_offset_ns();
  if (options.wait == WaitMode::sleep) {
    if (r_.clock_monotonic_offset_ns > kMaxClockOffsetNs) {
      throw std::runtime_error("steady_clock is " + std::to_string(r_.clock_monotonic_offset_ns) +
                               " ns away from CLOCK_MONOTONIC, so --wait sleep cannot aim its "
                               "clock_nanosleep; use --wait spin");
    }
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0) {
      throw std::runtime_error("prctl(PR_SET_TIMERSLACK, 1) failed");
    }
  }
  r_.timer_slack_ns = prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
}

void Driver::on_fire(std::uint32_t i) noexcept {
  const std::int64_t t = clock_.now();  // first thing: the moment the callback starts
  const std::int64_t deadline = deadline_[i];
  const std::int64_t late = t - deadline;
  if (late < 0) ++r_.early_fires;
  r_.min_lateness_ns = std::min(r_.min_lateness_ns, late);
  r_.lateness.record(late > 0 ? static_cast<std::uint64_t>(late) : 0);
  const std::int64_t due = round_up_to_tick(deadline);
  r_.lateness_past_tick.record(t > due ? static_cast<std::uint64_t>(t - due) : 0);

  // The contract of advance(): a timer runs in the first advance(now) with now >= its deadline
  // rounded up to the tick. r_.passes is the number of the running pass; the previous pass counts
  // only if it came after the schedule call.
  if (pass_now_ < due) {
    ++r_.fired_before_tick;
  } else if (r_.passes - 1 > sched_pass_[i] && prev_pass_now_ >= due) {
    ++r_.fired_a_pass_late;
  }

  switch (state_[i]) {
    case kFired: ++r_.double_fires; break;
    case kCancelled: ++r_.fired_after_cancel; break;
    default: break;
  }
  state_[i] = kFired;
  ++r_.fired;
}

void Driver::schedule_due(std::int64_t now) {
  const std::uint64_t n = opt_.timers;
  if (next_timer_ >= n) return;
  std::uint64_t upto = std::min(n, next_timer_ + opt_.batch);
  if (opt_.schedule_rate > 0) {
    // Timer k is due at sched_start_ + k / rate.
    const double elapsed_s = static_cast<double>(now - sched_start_) / 1e9;
    const auto target = static_cast<std::uint64_t>(elapsed_s * opt_.schedule_rate) + 1;
    upto = std::min(upto, target);
    if (upto <= next_timer_) return;
  }

  // Plan the batch outside the timed region: deadlines and cancel picks.
  for (std::uint64_t i = next_timer_; i < upto; ++i) {
    const std::int64_t delay = delay_(rng_);
    deadline_[i] = now + delay;
    last_deadline_ = std::max(last_deadline_, deadline_[i]);
    if (pick_(rng_)) {
      // Strictly between the schedule and the deadline (at the deadline for a zero delay).
      const auto offset = static_cast<std::int64_t>(when_(rng_) * static_cast<double>(delay));
      cancels_.emplace(now + std::min(offset, delay), static_cast<std::uint32_t>(i));
    }
  }

  std::uint64_t rejected = 0;
  const std::int64_t t0 = clock_.now();
  for (std::uint64_t i = next_timer_; i < upto; ++i) {
    const auto k = static_cast<std::uint32_t>(i);
    const TimerId id = wheel_.schedule_at(Nanos(deadline_[i]), [this, k] { on_fire(k); });
    id_[i] = id.raw();
    state_[i] = id ? kPending : kUnscheduled;
    sched_pass_[i] = r_.passes;
    rejected += id ? 0 : 1;
  }
  const std::int64_t t1 = clock_.now();
  r_.schedule_ns += t1 - t0;
  ++r_.schedule_batches;

  if (rejected != 0) {
    if (r_.rejected == 0) {
      for (std::uint64_t i = next_timer_; i < upto; ++i) {
        if (state_[i] == kUnscheduled) {
          r_.reject_reason = std::string(to_string(TimerId::from_raw(id_[i]).status()));
          break;
        }
      }
    }
    r_.rejected += rejected;
  }
  r_.scheduled += (upto - next_timer_) - rejected;
  next_timer_ = upto;
}

std::int64_t Driver::next_schedule_time() const noexcept {
  if (next_timer_ >= opt_.timers) return kNever;
  if (opt_.schedule_rate <= 0) return 0;
  const double at = static_cast<double>(next_timer_) * 1e9 / opt_.schedule_rate;
  return sched_start_ + static_cast<std::int64_t>(std::ceil(at));
}

void Driver::cancel_due(std::int64_t now) {
  while (!cancels_.empty() && cancels_.top().first <= now) {
    // Gather the ids first, so the timed loop reads them in order from one small buffer.
    std::size_t n = 0;
    while (n < cancel_batch_.size() && !cancels_.empty() && cancels_.top().first <= now) {
      cancel_batch_[n] = cancels_.top().second;
      cancel_id_[n++] = id_[cancels_.top().second];
      cancels_.pop();
    }
    const std::int64_t t0 = clock_.now();
    for (std::size_t k = 0; k < n; ++k) {
      cancel_result_[k] = wheel_.cancel(TimerId::from_raw(cancel_id_[k])) ? 1 : 0;
    }
    const std::int64_t t1 = clock_.now();
    r_.cancel_ns += t1 - t0;
    ++r_.cancel_batches;
    r_.cancel_calls += n;

    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t i = cancel_batch_[k];
      if (cancel_result_[k] != 0) {
        ++r_.cancelled;
        if (state_[i] != kPending) ++r_.cancel_true_not_pending;
        state_[i] = kCancelled;
      } else {
        ++r_.cancel_false;
        if (state_[i] == kPending) ++r_.cancel_false_pending;
      }
    }
  }
}

void Driver::pass(std::int64_t now) {
  const std::optional<Nanos> next = wheel_.next_deadline();
  const bool due = next && next->count() <= now;
  if (due) {
    r_.tick_lag.record(static_cast<std::uint64_t>(now - next->count()));
    ++r_.passes_due;
  } else if (!next && wheel_.pending() != 0) {
    ++r_.next_deadline_missing;
  }
  prev_pass_now_ = pass_now_;
  pass_now_ = now;
  ++r_.passes;
  const std::size_t ran = wheel_.advance(Nanos(now));
  if (due || ran != 0) r_.pass_cost.record(static_cast<std::uint64_t>(clock_.now() - now));
  if (ran != 0 && !due) ++r_.ran_before_next_deadline;
  r_.peak_pending = std::max<std::uint64_t>(r_.peak_pending, wheel_.pending());
}

void Driver::print_status(std::int64_t now) {
  const std::uint64_t resolved = r_.fired + r_.cancelled;
  const std::uint64_t expected = r_.scheduled >= resolved ? r_.scheduled - resolved : 0;
  const bool mismatch = expected != wheel_.pending() || r_.scheduled < resolved;
  r_.pending_mismatch += mismatch ? 1 : 0;
  if (opt_.quiet) return;
  char line[256];
  std::snprintf(line, sizeof line,
                "[%7.1f s] scheduled %llu  fired %llu  cancelled %llu  pending %llu  "
                "lateness p99 %s us%s\n",
                static_cast<double>(now - sched_start_) / 1e9,
                static_cast<unsigned long long>(r_.scheduled),
                static_cast<unsigned long long>(r_.fired),
                static_cast<unsigned long long>(r_.cancelled),
                static_cast<unsigned long long>(wheel_.pending()),
                format_us(static_cast<std::int64_t>(r_.lateness.percentile(99))).c_str(),
                mismatch ? "  (pending() != scheduled - fired - cancelled)" : "");
  status_ << line << std::flush;
}

Report Driver::run() {
  // The wheel's time is 0 until the first pass; so is the clock's from here, whatever the setup
  // (allocation, the clock measurements) took.
  r_.loadavg_start = read_loadavg();
  const rusage usage_start = read_rusage();
  clock_.restart();
  sched_start_ = clock_.now();
  std::int64_t next_status = sched_start_ + kSecond;
  std::int64_t give_up_at = kNever;
  for (;;) {
    std::int64_t now = clock_.now();
    const std::uint64_t batches = r_.cancel_batches + r_.schedule_batches;
    cancel_due(now);
    schedule_due(now);
    if (r_.cancel_batches + r_.schedule_batches != batches) {
      // The batches took time: pass a fresh now, after cancelling what came due meanwhile (a
      // timer's cancel time is before its deadline, so its cancel must precede the pass).
      now = clock_.now();
      cancel_due(now);
    }
    pass(now);

    if (now >= next_status) {
      print_status(now);
      next_status += kSecond * ((now - next_status) / kSecond + 1);
    }
    if (next_timer_ == opt_.timers) {
      if (wheel_.pending() == 0) break;
      if (give_up_at == kNever) give_up_at = last_deadline_ + opt_.give_up_ns;
      if (now >= give_up_at) {
        r_.gave_up = true;
        break;
      }
    }

    if (opt_.wait == WaitMode::sleep) {
      // Cancels do not wake the loop: each is before its timer's deadline, so the wake-up for
      // the wheel (at or before next_deadline()) comes in time to make it, and the wake-up count
      // is the wheel's and the pacing's, not one per cancel.
      std::int64_t wake = std::min({next_status, give_up_at, next_schedule_time()});
      const std::optional<Nanos> next = wheel_.next_deadline();
      const bool for_wheel = next && next->count() <= wake;
      if (for_wheel) wake = next->count();
      if (wake > clock_.now()) {
        clock_.sleep_until(wake);
        ++r_.wakeups;
        r_.wakeups_for_wheel += for_wheel ? 1 : 0;
        const std::int64_t woke = clock_.now();
        r_.oversleep.record(woke > wake ? static_cast<std::uint64_t>(woke - wake) : 0);
      }
    }
  }
  r_.run_s = static_cast<double>(clock_.now() - sched_start_) / 1e9;
  const rusage usage_end = read_rusage();
  r_.voluntary_switches = static_cast<std::uint64_t>(usage_end.ru_nvcsw - usage_start.ru_nvcsw);
  r_.involuntary_switches = static_cast<std::uint64_t>(usage_end.ru_nivcsw - usage_start.ru_nivcsw);
  r_.loadavg_end = read_loadavg();
  finish();
  return std::move(r_);
}

void Driver::finish() {
  if (r_.fired == 0) r_.min_lateness_ns = 0;
  r_.cancels_unattempted = cancels_.size();

  const WheelStats stats = wheel_.stats();
  r_.pending_end = wheel_.pending();
  r_.wheel_scheduled = stats.scheduled;
  r_.wheel_fired = stats.fired;
  r_.wheel_cancelled = stats.cancelled;
  r_.wheel_rejected = stats.rejected;
  r_.wheel_passes = stats.passes;
  r_.wheel_bytes = stats.bytes;
  r_.pool_nodes = stats.pool_nodes;
  r_.pool_capacity = stats.pool_capacity;
  r_.pool_segments = stats.pool_segments;
  r_.moved = stats.moved;
  r_.moved_ahead = stats.moved_ahead;
  r_.max_pass_work = stats.max_pass_work;

  // A resolved timer's id is stale: cancelling it again must return false, even though its node
  // has since been recycled for other timers.
  for (std::uint64_t i = 0; i < opt_.timers; ++i) {
    switch (state_[i]) {
      case kFired: ++r_.state_fired; break;
      case kCancelled: ++r_.state_cancelled; break;
      default: ++r_.state_other; continue;
    }
    ++r_.stale_cancels;
    if (wheel_.cancel(TimerId::from_raw(id_[i]))) ++r_.stale_cancel_true;
  }

  r_.harness_bytes = opt_.timers * (sizeof(std::int64_t) + 2 * sizeof(std::uint64_t) + 1) +
                     cancels_.capacity() * sizeof(CancelEvent) +
                     cancel_batch_.size() * (sizeof(std::uint32_t) + sizeof(std::uint64_t) + 1);
  r_.peak_rss_bytes = static_cast<std::uint64_t>(read_rusage().ru_maxrss) * 1024;  // KiB on Linux
  check_accounting(r_);
}

}  // namespace

Report run_stress(const Options& options, std::ostream& status) {
  // The driver holds a 58 KiB histogram per figure and the wheel; keep it off the stack.
  auto driver = std::make_unique<Driver>(options, status);
  return driver->run();
}

}  // namespace tickwheel::stress
