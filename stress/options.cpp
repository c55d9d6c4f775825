// stress/options.cpp — the command line (CLI11), the profile fallback, and the renderings of a
// configuration (durations, the one-line description).
#include "options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <type_traits>
#include <vector>

#include "clock.hpp"
#include "format.hpp"
#include "platform.hpp"
#include "profiles.hpp"

namespace tickwheel::stress {
namespace {

constexpr std::int64_t kDay = 86'400 * kSecond;
// The units a duration is written in, largest first (format_duration() and --help's DURATION).
constexpr std::pair<std::string_view, std::int64_t> kUnits[] = {
    {"h", 3'600 * kSecond}, {"min", 60 * kSecond}, {"s", kSecond}, {"ms", kMs}, {"us", 1'000}, {"ns", 1}};
// Slots are numbered with 32 bits (the harness's per-timer state and the callable's capture).
constexpr std::uint64_t kMaxSlots = std::numeric_limits<std::uint32_t>::max();

// Each enumerated option's names, in the order --help lists them.
constexpr std::pair<std::string_view, DelayKind> kDelays[] = {{"fixed", DelayKind::fixed},
                                                              {"uniform", DelayKind::uniform},
                                                              {"exponential", DelayKind::exponential},
                                                              {"bimodal", DelayKind::bimodal}};
constexpr std::pair<std::string_view, PeriodicPolicy> kPolicies[] = {
    {"catch_up", PeriodicPolicy::catch_up},
    {"fire_once_now", PeriodicPolicy::fire_once_now},
    {"skip", PeriodicPolicy::skip},
    {"fixed_delay", PeriodicPolicy::fixed_delay},
    {"all", PeriodicPolicy::all}};
constexpr std::pair<std::string_view, WaitStrategy> kWaits[] = {
    {"sleep", WaitStrategy::sleep}, {"spin", WaitStrategy::spin}, {"hybrid", WaitStrategy::hybrid}};
constexpr std::pair<std::string_view, ExecutorKind> kExecutors[] = {{"inline", ExecutorKind::inline_},
                                                                    {"pool", ExecutorKind::pool}};
constexpr std::pair<std::string_view, Threads> kThreads[] = {{"workers", Threads::workers},
                                                             {"manual", Threads::manual}};

template <class E, std::size_t N>
std::string_view lookup(const std::pair<std::string_view, E> (&names)[N], E v) noexcept {
  for (const auto& [name, e] : names) {
    if (e == v) return name;
  }
  return "?";
}
std::string_view name_of(DelayKind k) noexcept { return lookup(kDelays, k); }
std::string_view name_of(WaitStrategy w) noexcept { return lookup(kWaits, w); }
std::string_view name_of(Threads t) noexcept { return lookup(kThreads, t); }

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The shortest exact rendering of a value, as --help and a profile's changes print it.
template <class T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return format_duration(v);  // every 64-bit signed option is a duration in ns
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(name_of(v));
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.empty() ? std::string("''") : v;
  } else if constexpr (std::is_same_v<T, double>) {
    return number(v);
  } else {
    return std::to_string(v);
  }
}

// Registers options bound to members of one Options, and remembers for each how to take its value
// from a profile, how to print it and how to write it into the report, so that a profile fills
// exactly the options not given, --help lists a profile's changes from the code that makes them, and
// the report's options section names every option.
class Binder {
 public:
  Binder(CLI::App& app, Options& o) : app_(app), o_(o) {}

  template <class T>
  CLI::Option* add(const std::string& name, T Options::*member, const std::string& help) {
    CLI::Option* opt = app_.add_option(name, o_.*member, help);
    opt->default_str(show(o_.*member));
    // The report's key: --delay-min -> delay_min_ns.
    std::string key = name.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    if constexpr (std::is_same_v<T, std::int64_t>) key += "_ns";
    entries_.push_back(Entry{opt, name, [this, member](const Options& from) { o_.*member = from.*member; },
                             [member](const Options& from) { return show(from.*member); },
                             [key, member](const Options& from, Json& j) {
                               if constexpr (std::is_enum_v<T>) {
                                 j[key] = name_of(from.*member);
                               } else {
                                 j[key] = from.*member;
                               }
                             }});
    return opt;
  }
  // A share of the timers (or of the delays): a fraction in [0, 1].
  void share(const std::string& name, double Options::*member, const std::string& help) {
    add(name, member, help)->check(CLI::Range(0.0, 1.0));
  }
  // A duration option: a number with a unit (kUnits), the unit required, in [min, max] ns.
  void duration(const std::string& name, std::int64_t Options::*member, const std::string& help,
                std::int64_t min = 0, std::int64_t max = kDay) {
    std::map<std::string, std::int64_t> units;
    for (const auto& [unit, ns] : kUnits) units.emplace(unit, ns);
    CLI::AsNumberWithUnit as_ns(units,
                                CLI::AsNumberWithUnit::Options(CLI::AsNumberWithUnit::CASE_SENSITIVE |
                                                               CLI::AsNumberWithUnit::UNIT_REQUIRED),
                                "UNIT");
    as_ns.description("");  // the type name and the footer say it: DURATION, e.g. 100us
    add(name, member, help)
        ->type_name("DURATION")
        ->transform(as_ns)
        ->check(CLI::Range(min, max).description(""));
  }
  // An option that takes one of `names` (--help lists them).
  template <class T, std::size_t N>
  void choice(const std::string& name, T Options::*member, const std::string& help, const char* type,
              const std::pair<std::string_view, T> (&names)[N]) {
    std::vector<std::pair<std::string, T>> map;
    std::string list;
    for (const auto& [n, v] : names) {
      map.emplace_back(n, v);
      list += (list.empty() ? "{" : ",") + std::string(n);
    }
    add(name, member, help)->type_name(type)->transform(CLI::CheckedTransformer(map).description(list + "}"));
  }
  // A --name/--no-name flag pair bound to a bool member.
  void flag(const std::string& name, bool Options::*member, const std::string& help) {
    CLI::Option* opt = app_.add_flag(name + ",!--no-" + name.substr(2), o_.*member, help);
    entries_.push_back(
        Entry{opt, name, [this, member](const Options& from) { o_.*member = from.*member; },
              [name, member](const Options& from) {
                return from.*member ? std::string() : "--no-" + name.substr(2);
              },
              [key = name.substr(2), member](const Options& from, Json& j) { j[key] = from.*member; }});
  }

  // Every registered option not given on the command line takes the profile's value.
  void fill_from(const Options& profile) const {
    for (const Entry& e : entries_) {
      if (e.opt->count() == 0) e.take(profile);
    }
  }
  // " --timers 2000000 --cancel-share 0.95": the options whose values differ between the two.
  std::string changes(const Options& profile, const Options& base) const {
    std::string out;
    for (const Entry& e : entries_) {
      const std::string value = e.show(profile);
      if (value == e.show(base)) continue;
      out += value.rfind("--", 0) == 0 ? " " + value : " " + e.name + " " + value;
    }
    return out;
  }
  // The report's options section: the profile, then every option.
  Json to_json(const Options& o) const {
    Json j = {{"profile", o.profile}};
    for (const Entry& e : entries_) e.write(o, j);
    return j;
  }

 private:
  struct Entry {
    CLI::Option* opt;
    std::string name;
    std::function<void(const Options&)> take;
    std::function<std::string(const Options&)> show;
    std::function<void(const Options&, Json&)> write;
  };
  CLI::App& app_;
  Options& o_;
  std::vector<Entry> entries_;
};

// Shards (when 0), producers (when 0) and cancellers (down only) sized to `cpus` CPUs, for the
// options not given on the command line; returns what it chose, or "" if it changed nothing.
std::string fit_to_machine(Options& o, std::size_t cpus, bool shards_given, bool producers_given,
                           bool cancellers_given) {
  const Options before = o;
  if (!shards_given && o.shards == 0) {
    o.shards =
        !o.worker_cpus.empty() ? parse_cpu_list(o.worker_cpus).size() : std::max<std::size_t>(1, cpus / 2);
  }
  const std::size_t shards = o.shards != 0 ? o.shards : cpus;
  const std::size_t left = cpus > shards ? cpus - shards : 0;
  if (!producers_given && o.producers == 0) {
    o.producers = static_cast<unsigned>(std::max<std::size_t>(1, std::min(shards, left)));
  }
  if (!cancellers_given) {
    const std::size_t room = left > o.producers ? left - o.producers : 0;
    o.cancellers = static_cast<unsigned>(std::min<std::size_t>(o.cancellers, room));
  }
  if (o.shards == before.shards && o.producers == before.producers && o.cancellers == before.cancellers) {
    return {};
  }
  return format(
      "sized to %zu CPU%s: %zu shard%s, %u producer%s, %u canceller%s (the profile's: shards %s, "
      "producers %s, cancellers %u; --no-fit keeps them)",
      cpus, cpus == 1 ? "" : "s", o.shards, o.shards == 1 ? "" : "s", o.producers,
      o.producers == 1 ? "" : "s", o.cancellers, o.cancellers == 1 ? "" : "s",
      before.shards != 0 ? std::to_string(before.shards).c_str() : "one per core",
      before.producers != 0 ? std::to_string(before.producers).c_str() : "one per shard", before.cancellers);
}

}  // namespace

std::string_view name_of(PeriodicPolicy p) noexcept { return lookup(kPolicies, p); }
std::string_view name_of(ExecutorKind e) noexcept { return lookup(kExecutors, e); }

std::string format_duration(std::int64_t ns) {
  for (const auto& [unit, size] : kUnits) {
    if (ns != 0 && ns % size == 0) return std::to_string(ns / size) + std::string(unit);
  }
  return "0ns";
}

std::string describe(const Options& o) {
  std::string delay;
  switch (o.delay) {
    case DelayKind::fixed: delay = "fixed " + format_duration(o.delay_mean_ns); break;
    case DelayKind::uniform:
      delay = "uniform " + format_duration(o.delay_min_ns) + ".." + format_duration(o.delay_max_ns);
      break;
    case DelayKind::exponential: delay = "exponential mean " + format_duration(o.delay_mean_ns); break;
    case DelayKind::bimodal:
      delay = "bimodal " + format_duration(o.delay_short_ns) + " (" + number(o.short_share * 100) + "%) / " +
              format_duration(o.delay_long_ns);
      break;
  }
  std::string s = "profile " + o.profile + ": " + std::to_string(o.timers) + " timers, delay " + delay +
                  ", cancel share " + number(o.cancel_share) + ", reschedule share " +
                  number(o.reschedule_share) + ", " + std::to_string(o.periodic) + " periodic every " +
                  format_duration(o.period_ns) + " (schedule_every, " +
                  (o.periodic_policy == PeriodicPolicy::all
                       ? std::string("catch_up, fire_once_now, skip and fixed_delay in turn")
                       : std::string(name_of(o.periodic_policy))) +
                  ", " + number(o.periodic_cancel * 100) + "% cancelled during the run)";
  if (o.misfire_every_ns != 0) s += ", a forced misfire every " + format_duration(o.misfire_every_ns);
  s += ", " + std::to_string(o.repeated) + " RepeatedTimers";
  s += o.burst != 0 ? ", bursts of " + std::to_string(o.burst) + " every " + format_duration(o.burst_every_ns)
                    : ", no bursts";
  s += ", producers " + (o.producers != 0 ? std::to_string(o.producers) : std::string("one per shard")) +
       ", cancellers " + std::to_string(o.cancellers) + ", " +
       (o.schedule_rate > 0 ? "schedule rate " + number(o.schedule_rate) + "/s" : std::string("unpaced")) +
       ", " + format_duration(o.duration_ns) + ", seed " + std::to_string(o.seed);
  if (o.lead_ns != 0) s += ", lead " + format_duration(o.lead_ns);
  if (!o.rearm) s += ", armed once";
  s += " | engine: shards " + (o.shards != 0 ? std::to_string(o.shards) : std::string("one per core")) +
       ", tick " + format_duration(o.tick_ns) + ", wait " + std::string(name_of(o.wait)) + ", transfer cap " +
       std::to_string(o.transfer_cap) + (o.pin ? ", pinned" : ", not pinned") + ", max pending " +
       (o.max_pending != 0 ? std::to_string(o.max_pending) : std::string("unlimited"));
  s += o.executor == ExecutorKind::pool ? ", executor pool of " + std::to_string(o.pool_threads) +
                                              (o.pool_threads == 1 ? " thread" : " threads")
                                        : std::string(", executor inline");
  if (o.threads == Threads::manual) s += ", caller-driven (one polling thread per shard)";
  if (o.rt_priority > 0) s += ", SCHED_FIFO " + std::to_string(o.rt_priority);
  if (o.mlock) s += ", mlockall";
  return s;
}

namespace {

// The options whose presence on the command line the checks after parsing ask about.
struct OptionRefs {
  CLI::Option* producers = nullptr;
  CLI::Option* cancellers = nullptr;
  CLI::Option* shards = nullptr;
  CLI::Option* pool_threads = nullptr;
  CLI::Option* svg = nullptr;
};

// The workload: the one-shot population, its fates and its delays.
void add_workload(Binder& bind, OptionRefs& refs) {
  bind.add("--timers", &Options::timers,
           "One-shot population: slots kept armed (re-armed when their timer fires or is cancelled), "
           "so about this many are pending throughout")
      ->check(CLI::Range(std::uint64_t{0}, kMaxSlots));
  refs.producers = bind.add("--producers", &Options::producers,
                            "Producer threads (each schedules on its own home shard); 0 = one per shard")
                       ->check(CLI::Range(0u, 256u));
  bind.add("--schedule-rate", &Options::schedule_rate,
           "Most schedule calls per second over all producers; 0 = as fast as the slots come due "
           "(the fill is then a tight loop)")
      ->check(CLI::NonNegativeNumber);
  bind.share("--cancel-share", &Options::cancel_share,
             "Share of one-shot timers cancelled before they fire, each at a time uniform between its "
             "schedule and its deadline");
  bind.share("--reschedule-share", &Options::reschedule_share,
             "Share of one-shot timers that are idle timeouts: pushed back 1 to 3 times by "
             "Timer::reschedule() (each time at a moment uniform before the deadline, to that moment plus "
             "the timer's delay), then left to fire, each fire checked against the deadline it has; at "
             "most 1 - --cancel-share");
  refs.cancellers =
      bind.add("--cancellers", &Options::cancellers,
               "Extra threads that cancel: each producer deals its cancels round robin between itself "
               "and these N threads, so N/(N+1) of them come from another thread; 0 = producers only")
          ->check(CLI::Range(0u, 256u));
  bind.choice("--delay", &Options::delay,
              "One-shot delay distribution: fixed (--delay-mean), uniform (--delay-min..--delay-max), "
              "exponential (mean --delay-mean), bimodal (--delay-short with probability --short-share, "
              "else --delay-long)",
              "KIND", kDelays);
  bind.duration("--delay-min", &Options::delay_min_ns, "uniform: shortest delay");
  bind.duration("--delay-max", &Options::delay_max_ns, "uniform: longest delay");
  bind.duration("--delay-mean", &Options::delay_mean_ns, "fixed: the delay; exponential: the mean delay");
  bind.duration("--delay-short", &Options::delay_short_ns, "bimodal: the short delay (a request timeout)");
  bind.duration("--delay-long", &Options::delay_long_ns, "bimodal: the long delay (an idle timeout)");
  bind.share("--short-share", &Options::short_share, "bimodal: share of delays that are short");
}

// Periodic and repeated timers, bursts, the seed.
void add_periodic(Binder& bind) {
  bind.add("--periodic", &Options::periodic,
           "Periodic timers, besides the one-shots, started at random phases: each is one "
           "Engine::schedule_every() timer on its producer's home shard, of the policy --periodic-policy "
           "gives it, each run checked against that policy's rule and its lateness measured against its "
           "point on the timer's grid (or the earliest it may run); stop() returns those not cancelled")
      ->check(CLI::Range(std::uint64_t{0}, kMaxSlots));
  bind.duration("--period", &Options::period_ns,
                "Period of the periodic timers, a whole number of ticks (fixed rate)", 1);
  bind.choice("--periodic-policy", &Options::periodic_policy,
              "The periodic timers' policy: catch_up, fire_once_now or skip (fixed rate, that Misfire), "
              "fixed_delay, or all (each of the four in turn)",
              "POLICY", kPolicies);
  bind.share("--periodic-cancel", &Options::periodic_cancel,
             "Share of periodic timers cancelled once, at a time uniform over the run, by a producer or a "
             "canceller (not re-armed): after cancel() returned true no run may start but the one that "
             "had begun");
  bind.duration("--misfire-every", &Options::misfire_every_ns,
                "Every this often, on each callback thread, one fixed-rate periodic run spins past two "
                "periods so that its misfire policy must act (stalls the shard: a check, not a "
                "measurement); 0 = never");
  bind.add("--repeated", &Options::repeated,
           "RepeatedTimers on an engine of their own, started, stopped, restarted and reset at random by "
           "one thread during the run, each run checked against its timeout; 0 = none")
      ->check(CLI::Range(0u, 64u));
  bind.add("--burst", &Options::burst,
           "Timers the first producer schedules in one tight loop every --burst-every (a flood "
           "meant to exceed the transfer cap); 0 = no bursts")
      ->check(CLI::Range(std::uint64_t{0}, kMaxSlots));
  bind.duration("--burst-every", &Options::burst_every_ns, "Interval between bursts", 1);
  bind.duration("--duration", &Options::duration_ns,
                "How long the producers run; then the engine is stopped and checked", 100'000'000);
  bind.add("--seed", &Options::seed, "Seeds the delays, fates and phases (not the timing)");
}

// The engine's options.
void add_engine(Binder& bind, OptionRefs& refs) {
  refs.shards = bind.add("--shards", &Options::shards,
                         "Engine shards (a wheel and a worker each); 0 = one per "
                         "physical core")
                    ->check(CLI::Range(std::size_t{0}, std::size_t{4096}));
  bind.duration("--tick", &Options::tick_ns, "Wheel tick of every shard, 1us..1h", 1'000, 3'600'000'000'000);
  bind.choice("--wait", &Options::wait,
              "How a worker waits: sleep (futex until the next deadline), spin (busy-poll, a core per "
              "shard), hybrid (spin 50us after each pass, then sleep)",
              "MODE", kWaits);
  bind.add("--transfer-cap", &Options::transfer_cap, "Hand-offs a worker moves into its wheel per pass")
      ->check(CLI::PositiveNumber);
  bind.flag("--pin", &Options::pin,
            "Bind each worker to a physical core (hwloc); --no-pin leaves them to the scheduler "
            "(default: --pin)");
  bind.add("--max-pending", &Options::max_pending,
           "Pending timers per shard past which schedules are rejected (counted, re-tried); "
           "0 = unlimited");
  bind.choice("--executor", &Options::executor,
              "Where fired callbacks run: inline (on the shard's worker, in its pass) or pool (handed to "
              "a tickwheel::ThreadPoolExecutor of --pool-threads threads, not pinned)",
              "KIND", kExecutors);
  refs.pool_threads =
      bind.add("--pool-threads", &Options::pool_threads, "Threads of the pool (--executor pool)");
  refs.pool_threads->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  bind.choice(
      "--threads", &Options::threads,
      "Who drives the shards: workers (the engine's threads) or manual (Threads::manual: one harness "
      "thread per shard calls Engine::poll(), spinning, or sleeping until next_deadline() but at most "
      "a tick)",
      "KIND", kThreads);
  bind.duration("--lead", &Options::lead_ns,
                "Added to every one-shot delay, so the fill is done before the first deadline");
  bind.flag("--rearm", &Options::rearm,
            "Re-arm a one-shot slot once its timer fired or was cancelled; --no-rearm arms each once "
            "(default: --rearm)");
}

// Where the threads run, their priority and memory.
void add_placement(Binder& bind) {
  const auto cpu_list = CLI::Validator(
      [](std::string& v) {
        try {
          if (parse_cpu_list(v).empty()) return std::string("an empty CPU list");
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      },
      "CPUS", "cpu list");
  bind.flag("--fit", &Options::fit,
            "Size shards (if 0), producers (if 0) and cancellers (down only) to the CPUs "
            "this process may use, so busy threads do not outnumber them; options given "
            "here are kept (default: --fit)");
  CLI::Option* worker_cpus =
      bind.add("--worker-cpus", &Options::worker_cpus,
               "CPUs of the workers (or polling threads), shard i on the i-th, e.g. 2-3; "
               "'' = one PU per core from the last allowed CPU down");
  worker_cpus->type_name("CPUS")->check(cpu_list);
  bind.add("--producer-cpus", &Options::producer_cpus,
           "CPUs the producers and cancellers may run on; '' = the allowed CPUs off the workers' cores")
      ->type_name("CPUS")
      ->check(cpu_list);
  bind.add("--control-cpu", &Options::control_cpu,
           "CPU of the control thread; -1 = the first worker's (sleep, hybrid) or a CPU apart (spin)")
      ->check(CLI::Range(-1, 4095));
  bind.flag("--control", &Options::control,
            "Run the control thread, which measures the platform's own wake-up floor beside the engine "
            "(default: --control)");
  bind.add(
          "--rt-priority", &Options::rt_priority,
          "SCHED_FIFO at this priority for the workers (or polling threads) and the control thread; 0 = off; "
          "refused with an error, never ignored, when not permitted")
      ->check(CLI::Range(0, 99));
  bind.flag("--mlock", &Options::mlock,
            "mlockall(MCL_CURRENT | MCL_FUTURE) before the run; refused with an error when not permitted "
            "(default: --no-mlock)");
}

// The files written, and the runs that only read reports.
void add_output(CLI::App& app, Options& o, OptionRefs& refs) {
  app.add_option("--json", o.json_path, "Write the whole report as JSON to this file; '' = none")
      ->capture_default_str();
  refs.svg =
      app.add_option("--svg", o.svg_path,
                     "Write the lateness plot (percentile curve, and p99 and max per second) as an SVG "
                     "to this file (stress/plot.py, matplotlib); '' = none")
          ->capture_default_str();
  app.add_option("--svg-from", o.svg_from,
                 "Run nothing: render --svg from this JSON report, as written by --json")
      ->check(CLI::ExistingFile);
  app.add_option("--hlog", o.hlog_path,
                 "Also write the lateness, past-the-tick, control and tick-probe histograms of every second "
                 "as an HdrHistogram interval log (format 1.3, tags) for HdrHistogram's own tools; '' = none")
      ->capture_default_str();
  app.add_option("--compare", o.compare,
                 "Run nothing: print two JSON reports side by side (percentiles, the control's floor, "
                 "throughput, platform and configuration differences) and, with --svg, plot both")
      ->expected(2)
      ->type_name("A.json B.json")
      ->check(CLI::ExistingFile);
  app.add_flag("--quiet", o.quiet, "No status line on stderr while running");
}

// The help's footer: the profiles and what each changes, the files and the exit status.
std::string footer(const Binder& bind) {
  std::string footer =
      "=VALUE after an option is its default, i.e. the `default` profile's. Durations take a unit:\n"
      "ns, us, ms, s, min or h (e.g. 100us, 20s).\n"
      "Profiles, and what each changes (an option given on the command line wins):\n";
  const Options base;
  for (const Profile& p : profiles()) {
    Options changed;
    p.apply(changed);
    footer += "  " + std::string(p.name) + ": " + std::string(p.summary) + "\n";
    const std::string diff = bind.changes(changed, base);
    if (!diff.empty()) footer += "     " + diff + "\n";
  }
  footer +=
      "While running, one status line per second goes to stderr (rewritten in place on a terminal);\n"
      "the report goes to stdout, the JSON and SVG files where --json and --svg say.\n"
      "Exit status: 0 if every timer fired exactly once, was cancelled, or was returned by stop(),\n"
      "and no accounting rule broke; 1 if one broke (each is listed in the report); 2 if the engine\n"
      "or the system refused the setup, or a file could not be read or written; CLI11's own codes\n"
      "for a malformed command line.";
  return footer;
}

// What CLI11's own checks cannot see: options that contradict each other or the machine.
void validate(Options& o, const OptionRefs& refs) {
  o.svg_required = refs.svg->count() != 0;
  if (!o.compare.empty() && !o.svg_required) o.svg_path.clear();  // a plot only when asked for
  if (o.fit) {
    o.fitted = fit_to_machine(o, std::max<std::size_t>(1, allowed_cpus().size()), refs.shards->count() != 0,
                              refs.producers->count() != 0, refs.cancellers->count() != 0);
  }
  if (o.rt_priority > 0 && o.executor == ExecutorKind::pool && o.threads == Threads::workers) {
    throw CLI::ValidationError("--rt-priority",
                               "needs --executor inline or --threads manual: the harness finds each "
                               "worker's thread by a timer it runs, which a pool would run instead");
  }
  if (!o.worker_cpus.empty() && !o.pin) {
    throw CLI::ValidationError("--worker-cpus", "contradicts --no-pin");
  }
  if (o.delay == DelayKind::uniform && o.delay_min_ns > o.delay_max_ns) {
    throw CLI::ValidationError(
        "--delay-min",
        format_duration(o.delay_min_ns) + " is longer than --delay-max " + format_duration(o.delay_max_ns));
  }
  // 1e-9: shares written in decimal that add up to 1 pass whatever their binary rounding.
  if (o.cancel_share + o.reschedule_share > 1.0 + 1e-9) {
    throw CLI::ValidationError("--reschedule-share", number(o.reschedule_share) + " and --cancel-share " +
                                                         number(o.cancel_share) +
                                                         " add up to more than 1 (a timer is cancelled, "
                                                         "rescheduled, or neither)");
  }
  if (o.periodic != 0 && o.period_ns % o.tick_ns != 0) {
    throw CLI::ValidationError("--period",
                               format_duration(o.period_ns) + " is not a whole number of --tick " +
                                   format_duration(o.tick_ns) + " (periodic timers run at fixed rate)");
  }
  if (o.misfire_every_ns != 0 && (o.periodic == 0 || o.periodic_policy == PeriodicPolicy::fixed_delay)) {
    throw CLI::ValidationError("--misfire-every",
                               "needs fixed-rate periodic timers (--periodic above 0 and a --periodic-policy "
                               "other than fixed_delay): only their misfire policies are forced");
  }
  if (refs.pool_threads->count() != 0 && o.executor != ExecutorKind::pool) {
    throw CLI::ValidationError("--pool-threads", "needs --executor pool");
  }
  if (o.timers + o.periodic + o.burst > kMaxSlots) {
    throw CLI::ValidationError("--timers", "--timers + --periodic + --burst must be below 2^32");
  }
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine result;
  Options& o = result.options;
  CLI::App app{
      "tickwheel-stress: drives a tickwheel::Engine (real worker threads, the real monotonic clock)\n"
      "with producer threads that keep a population of one-shot timers armed, cancel a share of them\n"
      "before they fire (from the producers and from canceller threads), push another share back\n"
      "(Timer::reschedule, as an idle timeout is), and periodic timers\n"
      "(Engine::schedule_every); callbacks run on the workers or on a thread pool (--executor).\n"
      "It measures and reports; it asserts no latency figure. Reports: schedule, cancel and fire\n"
      "throughput; the lateness of every fire (callback start - deadline) as percentiles; tick lag;\n"
      "per-shard counters; transfer-cap hits; wake-ups; the callback threads; memory per pending\n"
      "timer; the clock's own cost; and exactly-once accounting, which alone decides the exit status.",
      "tickwheel-stress"};

  std::vector<std::string> profile_names;
  for (const Profile& p : profiles()) profile_names.emplace_back(p.name);
  app.add_option("--profile", o.profile, "Named workload (listed below); options given override it")
      ->capture_default_str()
      ->check(CLI::IsMember(profile_names));

  Binder bind(app, o);
  OptionRefs refs;
  add_workload(bind, refs);
  add_periodic(bind);
  add_engine(bind, refs);
  add_placement(bind);
  add_output(app, o, refs);
  app.footer(footer(bind));

  try {
    app.parse(argc, argv);
    const Profile* profile = find_profile(o.profile);
    Options from_profile;
    profile->apply(from_profile);
    from_profile.profile = o.profile;
    bind.fill_from(from_profile);
    validate(o, refs);
    o.as_json = bind.to_json(o);
  } catch (const CLI::ParseError& e) {
    result.exit_code = app.exit(e);
  }
  return result;
}

}  // namespace tickwheel::stress
