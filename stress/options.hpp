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

// Each member is the option of the same name (--delay-min for delay_min_ns), whose --help text in
// options.cpp says what it means; the comments here say only what the name does not.
struct Options {
  std::string profile = "default";

  // ---- Workload ----
  std::uint64_t timers = 1'000'000;  // one-shot slots, each kept armed with one timer
  unsigned producers = 0;            // 0 = one per shard
  double schedule_rate = 0;          // calls per second, all producers; 0 = unpaced
  double cancel_share = 0.5;
  double reschedule_share = 0.2;  // at most 1 - cancel_share (docs/stress.md, "Reschedules")
  unsigned cancellers = 1;
  DelayKind delay = DelayKind::uniform;
  std::int64_t delay_min_ns = 1'000'000;        // 1ms
  std::int64_t delay_max_ns = 10'000'000'000;   // 10s
  std::int64_t delay_mean_ns = 1'000'000'000;   // 1s
  std::int64_t delay_short_ns = 100'000'000;    // 100ms
  std::int64_t delay_long_ns = 30'000'000'000;  // 30s
  double short_share = 0.5;
  std::uint64_t periodic = 10'000;       // schedule_every() timers, besides the one-shots
  std::int64_t period_ns = 100'000'000;  // 100ms
  PeriodicPolicy periodic_policy = PeriodicPolicy::all;
  double periodic_cancel = 0.1;
  std::int64_t misfire_every_ns = 0;            // forced misfires (docs/stress.md); 0 = never
  unsigned repeated = 4;                        // RepeatedTimers, on an Engine of their own (repeated.hpp)
  std::uint64_t burst = 0;                      // schedules per burst, in a tight loop; 0 = none
  std::int64_t burst_every_ns = 2'000'000'000;  // 2s
  std::int64_t duration_ns = 30'000'000'000;    // 30s
  std::uint64_t seed = 1;
  std::int64_t lead_ns = 0;  // added to every one-shot delay (the batch profile's 2 s)
  bool rearm = true;         // false: each one-shot slot is armed once

  // ---- Engine (EngineOptions) ----
  std::size_t shards = 0;            // 0 = one per physical core
  std::int64_t tick_ns = 1'000'000;  // 1ms
  WaitStrategy wait = WaitStrategy::sleep;
  std::size_t transfer_cap = 100'000;
  bool pin = true;
  std::size_t max_pending = 0;  // per shard; 0 = unlimited
  ExecutorKind executor = ExecutorKind::inline_;
  std::size_t pool_threads = 2;        // with ExecutorKind::pool
  Threads threads = Threads::workers;  // manual: one harness thread per shard polls (poller.hpp)

  // ---- Placement (placement.hpp) ----
  bool fit = true;
  std::string fitted;         // what --fit chose, "" if it changed nothing
  std::string worker_cpus;    // CPU list for the workers (EngineOptions::cpus); "" = planned
  std::string producer_cpus;  // CPU list for producers and cancellers; "" = the CPUs left
  int control_cpu = -1;       // -1 = planned
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
