// stress/options.hpp — a stress run's configuration, and the command line that fills it.
//
// One plain struct whose member initialisers are the `default` profile; another profile
// (profiles.hpp) changes some members, and an option given on the command line wins over both.
// --help prints these defaults, and the footer lists what each profile changes, rendered from the
// profile table itself, so neither can drift from the code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tickwheel/engine.hpp"

namespace tickwheel::stress {

// How each one-shot timer's delay is drawn.
enum class DelayKind {
  fixed,        // every delay is delay_mean
  uniform,      // uniform in [delay_min, delay_max]
  exponential,  // exponential with mean delay_mean (unbounded: a few land far out)
  bimodal,      // delay_short with probability short_share, else delay_long: a request timeout
                // and an idle timeout, each a configured constant as in a real gateway
};

// Where the engine runs fired callbacks (EngineOptions::executor).
enum class ExecutorKind {
  inline_,  // no executor: on the shard's worker, in its pass
  pool,     // a tickwheel::ThreadPoolExecutor of pool_threads threads (not pinned)
};

// The periodic policy of a periodic timer: its Cadence and, at fixed rate, its Misfire
// (tickwheel/wheel.hpp), each checked against its own rule (docs/stress.md). The first four are the
// kinds a timer can have, in this order (arrays of per-kind figures are indexed by them); `all`, as
// an option, gives periodic timer i the kind i % 4.
enum class PeriodicPolicy : std::uint8_t {
  catch_up,       // fixed rate, Misfire::catch_up: every grid point runs, in order
  fire_once_now,  // fixed rate, Misfire::fire_once_now: one run for all the missed ones
  skip,           // fixed rate, Misfire::skip: a period a whole period late is dropped
  fixed_delay,    // Cadence::fixed_delay: each run a period after the previous one ended
  all,
};
inline constexpr std::size_t kPeriodicKinds = static_cast<std::size_t>(PeriodicPolicy::all);

std::string_view name_of(PeriodicPolicy p) noexcept;
std::string_view name_of(ExecutorKind e) noexcept;

struct Options {
  std::string profile = "default";

  // ---- Workload ----
  // One-shot population: this many slots, each kept armed with one timer. When a slot's timer
  // fires or is cancelled the slot is re-armed with a fresh one, so about this many are pending
  // throughout, and the schedule rate follows from it: timers / mean lifetime.
  std::uint64_t timers = 1'000'000;
  unsigned producers = 0;    // producer threads; 0 = one per shard
  double schedule_rate = 0;  // schedule calls per second, all producers; 0 = unpaced
  // Share of one-shot timers cancelled before they fire, each at a time uniform between its
  // schedule and its deadline; a cancelled slot is re-armed at once (a message resets an idle timer).
  double cancel_share = 0.5;
  // Share of one-shot timers that are idle timeouts: pushed back by Timer::reschedule() 1 to 3
  // times, each at a moment uniform between the previous push (or the schedule) and the deadline,
  // to that moment plus the timer's delay, and then left to fire (docs/stress.md, "Reschedules").
  // At most 1 - cancel_share: a timer is cancelled, rescheduled, or neither.
  double reschedule_share = 0.2;
  unsigned cancellers = 1;  // extra threads that take a share of the cancels
  DelayKind delay = DelayKind::uniform;
  std::int64_t delay_min_ns = 1'000'000;        // 1ms
  std::int64_t delay_max_ns = 10'000'000'000;   // 10s
  std::int64_t delay_mean_ns = 1'000'000'000;   // 1s
  std::int64_t delay_short_ns = 100'000'000;    // 100ms
  std::int64_t delay_long_ns = 30'000'000'000;  // 30s
  double short_share = 0.5;
  // Periodic timers, besides the one-shots: each one Engine::schedule_every() timer on its
  // producer's home shard, of the policy periodic_policy gives it (see workload.hpp). A share
  // periodic_cancel of them is cancelled once, at a random time during the run, and not re-armed;
  // stop() returns the others.
  std::uint64_t periodic = 10'000;
  std::int64_t period_ns = 100'000'000;  // 100ms
  PeriodicPolicy periodic_policy = PeriodicPolicy::all;
  double periodic_cancel = 0.1;
  // Forced misfires: every this often, on each thread that runs callbacks, one fixed-rate periodic
  // run (each fixed-rate policy in turn) spins past two periods, so that its next period is a whole
  // period late and its misfire policy must act (docs/stress.md). It stalls that thread's shard: a
  // check of the policies, not a measurement. 0 = never.
  std::int64_t misfire_every_ns = 0;
  // RepeatedTimers, each started, stopped, restarted and reset at random by a thread of their own,
  // on an Engine of their own (repeated.hpp). 0 = none.
  unsigned repeated = 4;
  std::uint64_t burst = 0;                      // schedules per burst, in a tight loop; 0 = none
  std::int64_t burst_every_ns = 2'000'000'000;  // 2s
  std::int64_t duration_ns = 30'000'000'000;    // 30s
  std::uint64_t seed = 1;
  // Added to every one-shot delay: the fill then lies wholly before the first deadline (the
  // batch profile's 2 s lead).
  std::int64_t lead_ns = 0;
  // Re-arm a one-shot slot once its timer fired or was cancelled; false: each slot is armed once
  // (a batch of timers, then nothing).
  bool rearm = true;

  // ---- Engine (EngineOptions) ----
  std::size_t shards = 0;            // 0 = one per physical core
  std::int64_t tick_ns = 1'000'000;  // 1ms
  WaitStrategy wait = WaitStrategy::sleep;
  std::size_t transfer_cap = 100'000;
  bool pin = true;
  std::size_t max_pending = 0;  // per shard; 0 = unlimited
  ExecutorKind executor = ExecutorKind::inline_;
  std::size_t pool_threads = 2;  // with ExecutorKind::pool
  // workers: the engine's own worker threads; manual: Threads::manual, one harness thread per shard
  // calling Engine::poll() (spinning, or sleeping until next_deadline(), at most a tick, for sleep
  // and hybrid).
  Threads threads = Threads::workers;

  // ---- Placement (placement.hpp) ----
  // Size shards (when 0), producers (when 0) and cancellers (reduced only) to the CPUs this process
  // may use, so that busy threads do not outnumber them; options given on the command line are
  // kept. `fitted` says what was chosen.
  bool fit = true;
  std::string fitted;
  std::string worker_cpus;    // CPU list for the workers (EngineOptions::cpus); "" = planned
  std::string producer_cpus;  // CPU list for producers and cancellers; "" = the CPUs left
  int control_cpu = -1;       // the control thread's CPU; -1 = planned
  bool control = true;        // run the control thread
  int rt_priority = 0;        // SCHED_FIFO priority for the workers and the control; 0 = off
  bool mlock = false;         // mlockall before the run

  // ---- Output ----
  std::string json_path = "tickwheel-stress.json";  // empty = none
  std::string svg_path = "tickwheel-stress.svg";    // empty = none
  bool svg_required = false;                        // --svg given: no plot is a failure
  std::string svg_from;                             // render svg_path from this JSON, run nothing
  std::string hlog_path;                            // HdrHistogram interval log; empty = none
  std::vector<std::string> compare;                 // two JSON reports: compare them, run nothing
  bool quiet = false;                               // no status line

  // Every option above as run, for the report (filled by parse_command_line()).
  nlohmann::ordered_json as_json;
};

// What parse_command_line() decided.
struct CommandLine {
  Options options;
  int exit_code = -1;  // >= 0: exit with it now (--help, or a malformed command line)
};

// Parses argv with CLI11: the profile first, then every option not given takes the profile's
// value. Prints --help or the parse error itself and says so through exit_code.
CommandLine parse_command_line(int argc, char** argv);

// "1ms", "100us", "20s": the shortest exact rendering of a duration.
std::string format_duration(std::int64_t ns);

// One line naming the workload and the engine settings, for the report, the JSON and the plot title.
std::string describe(const Options& o);

}  // namespace tickwheel::stress
