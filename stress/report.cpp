// stress/report.cpp — the accounting rules, the text report and the JSON document of a stress run.
#include "report.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "format.hpp"
#include "json.hpp"

namespace tickwheel::stress {

namespace {

// The percentiles the report prints, with their JSON key; max is added separately.
constexpr std::pair<double, std::string_view> kPercentiles[] = {
    {50.0, "p50"}, {90.0, "p90"}, {99.0, "p99"}, {99.9, "p99_9"}, {99.99, "p99_99"}};

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }
double us(double ns) { return ns / 1e3; }
double per_second(std::uint64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}
double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
// ns per call inside the timed brackets, net of the one clock read each bracket holds (the first
// read returns before the calls, the second is inside the bracket).
double ns_per_call(std::uint64_t ns, std::uint64_t batches, std::uint64_t calls, double read_ns) {
  if (calls == 0) return 0.0;
  const double net = static_cast<double>(ns) - static_cast<double>(batches) * read_ns;
  return (net > 0 ? net : 0.0) / static_cast<double>(calls);
}
std::uint64_t sum(const StatusCounts& c) {
  std::uint64_t n = 0;
  for (const std::uint64_t v : c) n += v;
  return n;
}
// "none" or "12 max_pending_reached, 3 stopped"
std::string by_status(const StatusCounts& c) {
  std::string s;
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (c[k] == 0) continue;
    s +=
        (s.empty() ? "" : ", ") + std::to_string(c[k]) + " " + std::string(to_string(static_cast<Status>(k)));
  }
  return s.empty() ? "none" : s;
}

// "p50 12.345  p90 ...  max ...  mean ...  (n = ...)" in microseconds.
std::string percentile_line(const Histogram& h) {
  if (h.count() == 0) return "none";
  std::string line;
  for (const auto& [p, name] : kPercentiles) {
    line += format("%.*s %.3f  ", static_cast<int>(name.size()), name.data(),
                   us(static_cast<double>(h.percentile(p))));
  }
  line += format("max %.3f  mean %.3f  (n = %llu)", us(static_cast<double>(h.max())), us(h.mean()),
                 ull(h.count()));
  return line;
}

void histogram_json(JsonWriter& json, std::string_view key, const Histogram& h) {
  json.begin_object(key);
  json.field("count", h.count());
  json.field("min", h.min());
  json.field("mean", h.mean());
  for (const auto& [p, name] : kPercentiles) json.field(name, h.percentile(p));
  json.field("max", h.max());
  json.end_object();
}

// The percentile curve the plot draws: points at p = 1 - 10^(-k/10), i.e. ten per decade of
// 1 / (1 - p), up to the last decade the sample count resolves, then the maximum at 1 - 1/n.
void curve_json(JsonWriter& json, std::string_view key, const Histogram& h) {
  json.begin_array(key);
  const auto n = static_cast<double>(h.count());
  for (int k = 0; n > 0 && std::pow(10.0, k / 10.0) < n; ++k) {
    const double p = 100.0 * (1.0 - std::pow(10.0, -k / 10.0));
    json.begin_object();
    json.field("percentile", p);
    json.field("ns", h.percentile(p));
    json.end_object();
  }
  if (n > 0) {
    json.begin_object();
    json.field("percentile", 100.0 * (1.0 - 1.0 / n));
    json.field("ns", h.max());
    json.end_object();
  }
  json.end_array();
}

// Every failure reason the Status enum names (it is contiguous from ok), each with its count.
void status_json(JsonWriter& json, std::string_view key, const StatusCounts& c) {
  json.begin_object(key);
  for (std::size_t k = 1; k < c.size() && to_string(static_cast<Status>(k)) != "unknown"; ++k) {
    json.field(to_string(static_cast<Status>(k)), c[k]);
  }
  json.end_object();
}

// Threads of the executor's pool, 0 without one.
std::size_t pool_threads(const Report& r) {
  return r.options.executor == ExecutorKind::pool ? r.options.pool_threads : 0;
}

// The floor table: per percentile, the engine's lateness past the tick, the tick probes' lag, the
// control thread's lateness, and what the engine adds above the control.
struct FloorRow {
  std::string_view name;
  std::int64_t past_tick;
  std::int64_t probe;
  std::int64_t control;
};
std::vector<FloorRow> floor_rows(const Report& r) {
  std::vector<FloorRow> rows;
  auto at = [](const Histogram& h, double p) { return static_cast<std::int64_t>(h.percentile(p)); };
  for (const auto& [p, name] : kPercentiles) {
    rows.push_back(FloorRow{name, at(r.lateness_past_tick, p), at(r.probe_lag, p), at(r.control, p)});
  }
  rows.push_back(FloorRow{"max", static_cast<std::int64_t>(r.lateness_past_tick.max()),
                          static_cast<std::int64_t>(r.probe_lag.max()),
                          static_cast<std::int64_t>(r.control.max())});
  return rows;
}

std::string platform_text(const Report& r) {
  const Platform& p = r.platform;
  auto or_none = [](const std::string& v) { return v.empty() ? std::string("not set") : v; };
  std::string s;
  s += "platform    kernel " + p.kernel + "; clocksource " + p.clocksource + "; THP " + p.thp + "\n";
  s += "            isolcpus " + or_none(p.isolcpus) + ", nohz_full " + or_none(p.nohz_full) +
       ", rcu_nocbs " + or_none(p.rcu_nocbs) + " (isolated CPUs: " + format_cpu_list(p.isolated) +
       "); governor " + p.governor + "\n";
  s += "            allowed CPUs " + format_cpu_list(p.allowed) + "; SMT siblings:";
  for (const std::string& sib : p.siblings) s += " " + sib + ";";
  s += p.rt_known ? format(" RT throttling: sched_rt_runtime_us %lld of sched_rt_period_us %lld%s\n",
                           static_cast<long long>(p.rt_runtime_us), static_cast<long long>(p.rt_period_us),
                           p.rt_runtime_us < 0 ? " (off)" : "")
                  : std::string(" RT throttling: unknown\n");
  const Placement& pl = r.placement;
  s += "placement   workers on " +
       (pl.workers.empty() ? std::string("any CPU (not pinned)") : "CPUs " + format_cpu_list(pl.workers)) +
       ", producers and cancellers on " +
       (pl.load.empty() ? std::string("any CPU") : "CPUs " + format_cpu_list(pl.load)) + ", control thread " +
       (!r.control_ran
            ? std::string("off")
            : (r.options.wait == WaitStrategy::spin ? "spinning" : "sleeping") +
                  (pl.control >= 0 ? " on CPU " + std::to_string(pl.control) : std::string(" on any CPU"))) +
       (r.options.rt_priority > 0 ? format(", SCHED_FIFO %d", r.options.rt_priority) : std::string()) +
       (r.options.mlock ? ", memory locked" : "") + "\n";
  if (!r.fitted.empty()) s += "            " + r.fitted + "\n";
  for (const std::string& w : pl.warnings) s += "WARNING     " + w + "\n";
  if (pl.warnings.empty()) {
    s += "            no warning: every busy thread had a CPU of its own, and nothing else took it\n";
  }
  return s;
}

std::string floor_text(const Report& r) {
  std::string s;
  s += "floor       what the engine adds above the platform (us): the tick probes (one timer per shard due "
       "on every tick, one sample per tick) and every fire past its tick, against the control thread "
       "(cyclictest-style, same tick, same run)\n";
  if (!r.control_ran) {
    s += "            no control thread (--no-control): the engine's figures stand alone\n";
  }
  s += "            pct        past tick   tick probe      control  probe-control  past tick-control\n";
  for (const FloorRow& row : floor_rows(r)) {
    const std::string name(row.name);
    s += format(
        "            %-7s %12.1f %12.1f %12s %14s %18s\n", name.c_str(),
        us(static_cast<double>(row.past_tick)), us(static_cast<double>(row.probe)),
        r.control_ran ? format("%.1f", us(static_cast<double>(row.control))).c_str() : "-",
        r.control_ran ? format("%+.1f", us(static_cast<double>(row.probe - row.control))).c_str() : "-",
        r.control_ran ? format("%+.1f", us(static_cast<double>(row.past_tick - row.control))).c_str() : "-");
  }
  s += format("            samples: %llu fires, %llu probe runs, %llu control wake-ups\n",
              ull(r.lateness_past_tick.count()), ull(r.probe_lag.count()), ull(r.control.count()));
  for (std::size_t i = 0; i < r.shard_probes.size(); ++i) {
    const ShardProbe& p = r.shard_probes[i];
    s += format("tick probe  shard %zu: lag p50 %.1f p99 %.1f p99.9 %.1f max %.1f us (n = %llu)", i,
                us(static_cast<double>(p.lag.percentile(50))), us(static_cast<double>(p.lag.percentile(99))),
                us(static_cast<double>(p.lag.percentile(99.9))), us(static_cast<double>(p.lag.max())),
                ull(p.lag.count()));
    if (p.fires_per_tick.count() != 0) {
      s += format("; fires per tick p50 %llu p99 %llu max %llu", ull(p.fires_per_tick.percentile(50)),
                  ull(p.fires_per_tick.percentile(99)), ull(p.fires_per_tick.max()));
    }
    s += "\n";
  }
  return s;
}

// "fires p50 1 p99 40 max 900 (total 18350)": one count per pass.
std::string per_pass(const char* name, const Histogram& h, std::uint64_t total) {
  return format("%s p50 %llu p99 %llu max %llu (total %llu)", name, ull(h.percentile(50)),
                ull(h.percentile(99)), ull(h.max()), ull(total));
}

// Every pass of each shard, from the engine's on_pass hook (passes.hpp).
std::string passes_text(const Report& r) {
  std::string s =
      "passes      every pass of each shard, from the engine's on_pass hook: tick lag = start - the wake-up "
      "the wait before it planned, for the passes that had one and started at or after it (those woken "
      "before it, by a hand-off, a spin or a poll, are counted as early, not as a negative lag); duration "
      "= end - start (us); work per pass in counts\n";
  for (std::size_t i = 0; i < r.shard_passes.size(); ++i) {
    const ShardPasses& p = r.shard_passes[i];
    auto at = [](const Histogram& h, double pct) { return us(static_cast<double>(h.percentile(pct))); };
    s += format(
        "            shard %zu: %llu passes (%.0f/s): %llu with a tick lag, %llu early, %llu with no wake-up "
        "planned\n",
        i, ull(p.passes), per_second(p.passes, r.run_s), ull(p.tick_lag.count()), ull(p.early),
        ull(p.unplanned));
    s += format(
        "            shard %zu: tick lag p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f us; duration p50 "
        "%.1f "
        "p99 %.1f max %.1f us\n",
        i, at(p.tick_lag, 50), at(p.tick_lag, 90), at(p.tick_lag, 99), at(p.tick_lag, 99.9),
        us(static_cast<double>(p.tick_lag.max())), at(p.duration, 50), at(p.duration, 99),
        us(static_cast<double>(p.duration.max())));
    s += "            shard " + std::to_string(i) + ": per pass " +
         per_pass("fires", p.fired, p.fired_total) + "; " + per_pass("moves", p.moved, p.moved_total) + "; " +
         per_pass("transfers", p.transferred, p.transferred_total) + "; " +
         per_pass("cancels", p.cancels, p.cancels_total) + "\n";
  }
  return s;
}

std::string threads_text(const Report& r) {
  std::string s =
      "os threads  role       #      tid  placed  last CPU  voluntary  involuntary (context switches "
      "since the thread started, read before the stop)\n";
  for (const ThreadInfo& t : r.threads) {
    s += format("            %-9s %2zu %8d  %6s  %8s  %9s  %11s\n", t.role.c_str(), t.index,
                static_cast<int>(t.tid), t.cpus.c_str(),
                t.switches.last_cpu >= 0 ? std::to_string(t.switches.last_cpu).c_str() : "?",
                t.switches.known ? std::to_string(t.switches.voluntary).c_str() : "unknown",
                t.switches.known ? std::to_string(t.switches.involuntary).c_str() : "unknown");
  }
  for (const CpuIrq& c : r.interrupts) {
    if (!c.irq.known) {
      s += format("interrupts  CPU %u (%s): unknown (/proc/interrupts unreadable)\n", c.irq.cpu,
                  c.role.c_str());
      continue;
    }
    s += format("interrupts  CPU %u (%s): %llu during the run (%.0f/s)", c.irq.cpu, c.role.c_str(),
                ull(c.irq.total), per_second(c.irq.total, r.run_s));
    for (const auto& [name, n] : c.irq.top) s += format("; %s %llu", name.c_str(), ull(n));
    s += "\n";
  }
  return s;
}

std::string policies_text(const Report& r) {
  std::string s =
      "periodic    policy           timers       runs  before bound  forced misfires (each run checked "
      "against the earliest its policy lets it start)\n";
  for (std::size_t k = 0; k < kPeriodicKinds; ++k) {
    const PolicyReport& p = r.policies[k];
    const std::string name(name_of(static_cast<PeriodicPolicy>(k)));
    s += format("            %-14s %8llu %10llu %13llu %16llu\n", name.c_str(), ull(p.timers), ull(p.runs),
                ull(p.before_bound), ull(p.forced));
  }
  s += format(
      "            skipped by the engine %llu (at least the %llu forced misfires made certain, at most the "
      "%llu "
      "grid points skip timers passed without a run); cancelled during the run %llu (cancel() true), "
      "%llu of them with a run begun before cancel() returned, that ran after it as allowed; %llu "
      "returned false\n",
      ull(r.engine.skipped), ull(r.forced_skips), ull(r.skip_bound), ull(r.periodic_cancelled),
      ull(r.runs_after_cancel), ull(r.periodic_cancel_refused));
  const RepeatedReport& rt = r.repeated;
  if (rt.timers == 0) {
    s += "repeated    none (--repeated 0)\n";
    return s;
  }
  s += format(
      "repeated    %llu RepeatedTimers on an engine of their own: %llu starts, %llu stops, %llu restarts, "
      "%llu "
      "resets (%llu refused); %llu runs, %llu of them begun before the control call they followed; "
      "too early %llu, while stopped %llu\n"
      "            their engine: scheduled %llu, fired %llu, cancelled %llu, handed back at stop %llu, "
      "callback errors %llu\n",
      ull(rt.timers), ull(rt.starts), ull(rt.stops), ull(rt.restarts), ull(rt.resets), ull(rt.refused),
      ull(rt.runs), ull(rt.begun_before), ull(rt.too_early), ull(rt.while_stopped), ull(rt.engine.scheduled),
      ull(rt.engine.fired), ull(rt.engine.cancelled), ull(rt.returned), ull(rt.engine.callback_errors));
  return s;
}

void rule(Report& r, bool broken, std::string message) {
  if (broken) r.failures.push_back(std::move(message));
}

}  // namespace

double Report::bytes_per_pending() const noexcept {
  if (peak_pending == 0 || rss_at_peak_bytes <= rss_base_bytes + calendar_bytes_at_peak) return 0.0;
  return static_cast<double>(rss_at_peak_bytes - rss_base_bytes - calendar_bytes_at_peak) /
         static_cast<double>(peak_pending);
}

std::uint64_t Report::total_rejected() const noexcept { return sum(rejected); }

void check_accounting(Report& r) {
  r.failures.clear();
  const std::uint64_t scheduled = r.total_scheduled();
  const std::uint64_t cancelled = r.total_cancelled();
  rule(r, scheduled + r.periodic_runs != r.fired + cancelled + r.returned,
       format("scheduled %llu + periodic runs %llu != fired %llu + cancelled %llu + returned at stop %llu "
              "(a timer was lost or counted twice)",
              ull(scheduled), ull(r.periodic_runs), ull(r.fired), ull(cancelled), ull(r.returned)));
  rule(r, r.double_fires != 0,
       format("%llu callbacks ran for a timer that had already fired", ull(r.double_fires)));
  rule(r, r.overlapping_runs != 0,
       format("%llu periodic runs started while another run of the same timer ran", ull(r.overlapping_runs)));
  rule(r, r.unrecorded_fires != 0,
       format("%llu callbacks ran on a thread beyond the %zu workers and %zu pool threads, unrecorded "
              "(other rules may break with them)",
              ull(r.unrecorded_fires), r.shards, pool_threads(r)));
  rule(r, r.fired_after_cancel != 0,
       format("%llu callbacks ran for a timer whose cancel() had returned true", ull(r.fired_after_cancel)));
  rule(r, r.stray_fires != 0,
       format("%llu callbacks ran for a timer instance that was no longer the slot's own "
              "(resolved before, or never scheduled)",
              ull(r.stray_fires)));
  rule(r, r.early_fires != 0,
       format("%llu callbacks started before their deadline (earliest by %lld ns)", ull(r.early_fires),
              static_cast<long long>(-r.min_lateness_ns)));
  rule(r, r.fired_before_tick != 0,
       format("%llu callbacks started before their deadline rounded up to the tick",
              ull(r.fired_before_tick)));
  rule(r, r.cancel_true_not_pending != 0,
       format("%llu cancel() calls returned true for a timer that had already fired",
              ull(r.cancel_true_not_pending)));
  rule(r, r.moved_early != 0,
       format("%llu rescheduled timers fired before the deadline a reschedule() that returned true gave "
              "them (rounded up to the tick), though the deadline before it had not come when it returned",
              ull(r.moved_early)));
  rule(r, r.refused_pending != 0,
       format("%llu reschedule() calls returned false for a timer whose deadline had not come, which no "
              "pass could have claimed",
              ull(r.refused_pending)));
  rule(r, r.engine.rescheduled > r.rescheduled || r.rescheduled < r.engine.rescheduled + r.moved_raced,
       format("Engine::stats().rescheduled is %llu: more than the %llu reschedule() calls that returned "
              "true, or more than those less the %llu moves a fire at the deadline before won (each "
              "such move is dropped)",
              ull(r.engine.rescheduled), ull(r.rescheduled), ull(r.moved_raced)));
  rule(r, r.off_shard != 0,
       format("%llu timers landed on another shard than their thread's home shard", ull(r.off_shard)));
  rule(r, r.probe_failures != 0,
       format("%llu probe timers (an hour out) could not be cancelled", ull(r.probe_failures)));
  rule(r, r.pending_slots != r.returned,
       format("%llu slots were pending after stop() but stop() returned %llu timers", ull(r.pending_slots),
              ull(r.returned)));
  rule(r, r.returned_cancel_false != 0,
       format("%llu timers stop() returned refused cancel(), so they were not pending",
              ull(r.returned_cancel_false)));
  rule(
      r, r.pending_not_returned != 0,
      format("%llu pending slots' timers were not among those stop() returned", ull(r.pending_not_returned)));
  rule(r, r.stale_cancel_true != 0,
       format("%llu of %llu cancel() calls on stale handles (fired or cancelled) returned true",
              ull(r.stale_cancel_true), ull(r.stale_cancels)));
  rule(r, r.stop_returned != r.returned,
       format("Engine::stop(visit) returned %llu but handed %llu timers to its visitor", ull(r.stop_returned),
              ull(r.returned)));
  // The visitor's cancels are posted for the engine's destructor to recycle (Engine::stop(visit)):
  // pending counts them at once, stats().cancelled (timers recycled) not yet.
  const EngineStats& e = r.engine;
  rule(r,
       e.scheduled != scheduled || e.fired != r.fired || e.cancelled != cancelled ||
           e.rejected != r.total_rejected() || e.rearmed != r.periodic_runs + e.skipped || e.pending != 0,
       format("Engine::stats() (scheduled %llu, fired %llu, cancelled %llu, rejected %llu, rearmed %llu, "
              "pending %llu) disagrees with the harness (%llu, %llu, %llu, %llu, periodic runs %llu + "
              "skipped %llu, and none pending once stop()'s visitor cancelled the %llu it handed back)",
              ull(e.scheduled), ull(e.fired), ull(e.cancelled), ull(e.rejected), ull(e.rearmed),
              ull(e.pending), ull(scheduled), ull(r.fired), ull(cancelled), ull(r.total_rejected()),
              ull(r.periodic_runs), ull(e.skipped), ull(r.returned)));
  rule(r, e.skipped > r.skip_bound,
       format("Engine::stats().skipped is %llu, more than the %llu grid points the skip timers passed "
              "without a run (catch_up and fire_once_now never skip)",
              ull(e.skipped), ull(r.skip_bound)));
  rule(r, e.skipped < r.forced_skips,
       format("Engine::stats().skipped is %llu, fewer than the %llu periods forced misfires left a whole "
              "period late on skip timers, each of which must be dropped and counted",
              ull(e.skipped), ull(r.forced_skips)));
  rule(r, e.scheduled + e.rearmed != e.fired + e.skipped + e.cancelled + e.pending + r.returned,
       format("Engine::stats() broke its own identity once still: scheduled %llu + rearmed %llu != fired "
              "%llu + skipped %llu + cancelled %llu + pending %llu + cancelled by stop()'s visitor %llu",
              ull(e.scheduled), ull(e.rearmed), ull(e.fired), ull(e.skipped), ull(e.cancelled),
              ull(e.pending), ull(r.returned)));
  static constexpr std::array<const char*, kPeriodicKinds> kBroken{
      "catch_up runs started before their own grid point (every period from the first run)",
      "fire_once_now runs started before the first grid point after the pass that ran the run before: "
      "a missed period ran again instead of once for all",
      "skip runs started before the first grid point they may resume at: a period a whole period late "
      "ran instead of being dropped",
      "fixed_delay runs started less than a period after the previous run's callback returned"};
  for (std::size_t k = 0; k < kPeriodicKinds; ++k) {
    rule(r, r.policies[k].before_bound != 0, format("%llu %s", ull(r.policies[k].before_bound), kBroken[k]));
  }
  rule(r, r.periodic_cancel_refused != 0,
       format("%llu cancel() calls on periodic timers returned false, though each timer was cancelled once",
              ull(r.periodic_cancel_refused)));
  const RepeatedReport& rt = r.repeated;
  rule(r, rt.too_early != 0,
       format("%llu RepeatedTimer runs started sooner than the timeout after their start, restart, reset or "
              "the previous run's end",
              ull(rt.too_early)));
  rule(r, rt.while_stopped != 0,
       format("%llu RepeatedTimer runs started while stopped, beyond the one begun before stop() returned",
              ull(rt.while_stopped)));
  rule(r, rt.refused != 0,
       format("%llu RepeatedTimer calls returned false, though none was destroyed and its engine refuses "
              "nothing",
              ull(rt.refused)));
  rule(r, rt.returned != 0 || rt.engine.pending != 0,
       format("the repeated timers' engine handed back %llu timers (pending %llu) after every RepeatedTimer "
              "was destroyed, which cancels its armed timer",
              ull(rt.returned), ull(rt.engine.pending)));
  rule(r, rt.engine.scheduled != rt.engine.fired + rt.engine.cancelled || rt.engine.fired < rt.runs,
       format("the repeated timers' engine: scheduled %llu != fired %llu + cancelled %llu, or fewer fires "
              "than the %llu runs seen",
              ull(rt.engine.scheduled), ull(rt.engine.fired), ull(rt.engine.cancelled), ull(rt.runs)));
  rule(r, rt.engine.callback_errors != 0,
       format("%llu RepeatedTimer callbacks threw, though the harness's cannot",
              ull(rt.engine.callback_errors)));
  rule(
      r, e.executing != 0,
      format("Engine::stats().executing is %llu after stop(), which waits for every task", ull(e.executing)));
  rule(r, r.options.executor == ExecutorKind::inline_ && r.max_executing != 0,
       format("Engine::stats().executing reached %llu with no executor", ull(r.max_executing)));
  rule(r, e.callback_errors != 0,
       format("%llu callbacks threw, though none of the harness's can", ull(e.callback_errors)));
}

void print_report(const Report& r, std::ostream& out) {
  const Options& o = r.options;
  const double sched_ns = ns_per_call(r.schedule_ns, r.schedule_batches, r.schedule_calls, r.clock_read_ns);
  const double cancel_ns = ns_per_call(r.cancel_ns, r.cancel_batches, r.cancel_calls, r.clock_read_ns);
  std::string s;
  s += "tickwheel-stress: " + r.config + "\n";
  s += platform_text(r);
  s += format(
      "clock       steady_clock::now() costs %.1f ns per read (median of 5 loops of 1M reads); "
      "|steady_clock - CLOCK_MONOTONIC| %lld ns. Every fire's lateness includes one read, every "
      "timed batch one more\n",
      r.clock_read_ns, static_cast<long long>(r.clock_monotonic_offset_ns));
  s += format(
      "run         %.3f s of load (%u producers, %u cancellers, %zu shards, %u hardware threads); "
      "Engine::stop() took %.3f ms\n",
      r.run_s, r.producers, r.cancellers, r.shards, r.hardware_threads, r.stop_s * 1e3);
  s += format(
      "schedule    %llu calls by producers, %llu scheduled (%.0f/s over the run), rejected: %s\n"
      "            inside schedule_at() and schedule_every(): %.1f ns per call net of the clock = %.2f M/s "
      "per producer thread (%.1f calls per timed batch: up to 256, a burst whole, a periodic start "
      "alone; small batches pay cold caches)\n"
      "            periodic: %llu started with schedule_every, %llu of them with their first grid point a "
      "lower bound (its schedule call took a tick or more)\n",
      ull(r.schedule_calls), ull(r.scheduled), per_second(r.scheduled, r.run_s),
      by_status(r.rejected).c_str(), sched_ns, sched_ns > 0 ? 1e3 / sched_ns : 0.0,
      r.schedule_batches ? static_cast<double>(r.schedule_calls) / static_cast<double>(r.schedule_batches)
                         : 0.0,
      ull(r.periodic_started), ull(r.periodic_inexact));
  if (r.bursts != 0) {
    const double avg_ms = static_cast<double>(r.burst_ns) / static_cast<double>(r.bursts) / 1e6;
    s += format(
        "            bursts: %llu, %llu schedules in all, each one tight loop of %.2f ms on average "
        "(%.1f M/s), the longest %.2f ms = %.2f ticks; the transfer-cap hit counter %s (%llu hits, "
        "cap %zu)\n",
        ull(r.bursts), ull(r.burst_calls), avg_ms,
        r.burst_ns ? static_cast<double>(r.burst_calls) / (static_cast<double>(r.burst_ns) / 1e9) / 1e6 : 0.0,
        static_cast<double>(r.max_burst_ns) / 1e6,
        static_cast<double>(r.max_burst_ns) / static_cast<double>(o.tick_ns),
        r.engine.transfer_cap_hits != 0 ? "moved" : "did not move: no pass found more than the cap queued",
        ull(r.engine.transfer_cap_hits), o.transfer_cap);
  }
  s += format(
      "cancel      %llu calls (%.0f/s), %llu of them from canceller threads: %llu true, %llu false "
      "(the fire won: the cancel came at or after the deadline)\n"
      "            inside cancel(): %.1f ns per call net of the clock = %.2f M/s per thread (%.1f "
      "calls per timed batch); cancelled share of resolved one-shots %.3f (asked %g)\n",
      ull(r.cancel_calls), per_second(r.cancel_calls, r.run_s), ull(r.cancels_by_cancellers),
      ull(r.cancelled), ull(r.cancel_lost), cancel_ns, cancel_ns > 0 ? 1e3 / cancel_ns : 0.0,
      r.cancel_batches ? static_cast<double>(r.cancel_calls) / static_cast<double>(r.cancel_batches) : 0.0,
      r.oneshot_cancelled() + r.oneshot_fired() != 0
          ? static_cast<double>(r.oneshot_cancelled()) /
                static_cast<double>(r.oneshot_cancelled() + r.oneshot_fired())
          : 0.0,
      o.cancel_share);
  const double move_ns =
      ns_per_call(r.reschedule_ns, r.reschedule_batches, r.reschedule_calls, r.clock_read_ns);
  s += format(
      "reschedule  %llu calls (%.0f/s), all from producers (each posted to the shard): %llu true, %llu "
      "false (the timer had fired or was firing); the engine applied %llu moves (asked %g of one-shots)\n"
      "            inside reschedule(): %.1f ns per call net of the clock (%.1f calls per timed batch); "
      "%llu fires of moved timers checked against the deadline they had, %llu of them at the deadline "
      "before the last move, which had come while the move was on its way (allowed)\n",
      ull(r.reschedule_calls), per_second(r.reschedule_calls, r.run_s), ull(r.rescheduled),
      ull(r.reschedule_refused), ull(r.engine.rescheduled), o.reschedule_share, move_ns,
      r.reschedule_batches
          ? static_cast<double>(r.reschedule_calls) / static_cast<double>(r.reschedule_batches)
          : 0.0,
      ull(r.moved_fires), ull(r.moved_raced));
  s += format("fire        %llu callbacks (%.0f/s), of which %llu periodic runs (%.0f/s)\n", ull(r.fired),
              per_second(r.fired, r.run_s), ull(r.periodic_runs), per_second(r.periodic_runs, r.run_s));
  s += "  lateness, callback start - deadline (us), every fire:\n    " + percentile_line(r.lateness) + "\n";
  s += "  one-shot timers only:\n    " + percentile_line(r.oneshot_lateness) + "\n";
  s += "  periodic runs only, each against its own point on the timer's grid (or the earliest its policy "
       "lets it run):\n    " +
       percentile_line(r.periodic_lateness) + "\n";
  s += "  past the tick, callback start - deadline rounded up to the tick (us):\n    " +
       percentile_line(r.lateness_past_tick) + "\n";
  s += policies_text(r);
  s += "tick lag    a pass's start behind the deadline it waited (or spun) for, the worst per shard "
       "(Engine::stats(); every pass's below, under passes):";
  const EngineStats& e = r.engine;
  for (std::size_t i = 0; i < e.shards.size(); ++i) {
    s += format(" shard %zu %.1f us%s", i, us(static_cast<double>(e.shards[i].max_tick_lag_ns)),
                i + 1 < e.shards.size() ? "," : "");
  }
  s += "\n";
  s += floor_text(r);
  s += passes_text(r);
  s += format(
      "engine      transfer-cap hits %llu (passes that moved %zu hand-offs and left more); passes "
      "%llu (%.0f/s); wake-ups %llu (%.0f/s); callback errors %llu\n",
      ull(e.transfer_cap_hits), o.transfer_cap, ull(e.passes), per_second(e.passes, r.run_s), ull(e.wakeups),
      per_second(e.wakeups, r.run_s), ull(e.callback_errors));
  s += "shards      shard  scheduled      fired  cancelled  rearmed  rejected  cap-hits   passes  wake-ups  "
       "wake-ups/s  binding\n";
  for (std::size_t i = 0; i < e.shards.size(); ++i) {
    const ShardStats& sh = e.shards[i];
    s += format("            %5zu  %9llu  %9llu  %9llu  %7llu  %8llu  %8llu  %7llu  %8llu  %10.0f  %s\n", i,
                ull(sh.scheduled), ull(sh.fired), ull(sh.cancelled), ull(sh.rearmed), ull(sh.rejected),
                ull(sh.transfer_cap_hits), ull(sh.passes), ull(sh.wakeups), per_second(sh.wakeups, r.run_s),
                sh.binding.c_str());
  }
  if (o.executor == ExecutorKind::pool) {
    s += format(
        "executor    pool: a ThreadPoolExecutor of %zu thread%s (not pinned) ran the callbacks; at most "
        "%llu handed over and not yet returned at a sample (Engine::stats().executing), %llu after stop()\n",
        o.pool_threads, o.pool_threads == 1 ? "" : "s", ull(r.max_executing), ull(e.executing));
  } else {
    s += "executor    inline: each shard's worker ran its callbacks in its pass\n";
  }
  s += "threads     thread  shard      fired  periodic runs  lateness p50/p99/max us\n";
  for (std::size_t i = 0; i < r.callback_threads.size(); ++i) {
    const ThreadReport& t = r.callback_threads[i];
    s +=
        format("            %6zu  %5s  %9llu  %13llu  %.1f/%.1f/%.1f\n", i,
               t.shard >= 0 ? std::to_string(t.shard).c_str() : "pool", ull(t.fired), ull(t.periodic_runs),
               us(static_cast<double>(t.lateness.percentile(50))),
               us(static_cast<double>(t.lateness.percentile(99))), us(static_cast<double>(t.lateness.max())));
  }
  s += format(
      "memory      %.1f B per pending timer: RSS grew %.1f MiB from the baseline to the second "
      "with the most timers pending (%llu), less %.1f MiB of the producers' calendars\n"
      "            peak RSS %.1f MiB (whole process; the harness's own arrays %.1f MiB, allocated "
      "before the baseline)\n",
      r.bytes_per_pending(),
      mib(r.rss_at_peak_bytes > r.rss_base_bytes ? r.rss_at_peak_bytes - r.rss_base_bytes : 0),
      ull(r.peak_pending), mib(r.calendar_bytes_at_peak), mib(r.peak_rss_bytes), mib(r.harness_bytes));
  s += format(
      "machine     context switches during the run: %llu voluntary, %llu involuntary (preempted); "
      "load average (1 min) %.2f at the start, %.2f at the end\n",
      ull(r.voluntary_switches), ull(r.involuntary_switches), r.loadavg_start, r.loadavg_end);
  s += threads_text(r);
  for (const std::string& n : r.notices) s += "notice      " + n + "\n";
  s += format(
      "accounting  scheduled %llu + periodic runs %llu = fired %llu + cancelled %llu + returned at stop %llu "
      "(probes %llu included; rejected %llu accounted separately)\n",
      ull(r.total_scheduled()), ull(r.periodic_runs), ull(r.fired), ull(r.total_cancelled()), ull(r.returned),
      ull(r.probes), ull(r.total_rejected()));
  s += format(
      "            double fires %llu, overlapping periodic runs %llu, fired after cancel %llu, stray fires "
      "%llu, early fires %llu (min lateness %.3f us), fired before the tick %llu, cancel true on a fired "
      "timer %llu, fired before a rescheduled deadline %llu, reschedule false while pending %llu, "
      "off-shard %llu, unrecorded callbacks %llu\n",
      ull(r.double_fires), ull(r.overlapping_runs), ull(r.fired_after_cancel), ull(r.stray_fires),
      ull(r.early_fires), us(static_cast<double>(r.min_lateness_ns)), ull(r.fired_before_tick),
      ull(r.cancel_true_not_pending), ull(r.moved_early), ull(r.refused_pending), ull(r.off_shard),
      ull(r.unrecorded_fires));
  s += format(
      "            at stop: %llu slots pending, %llu timers handed to stop()'s visitor (stop(visit) returned "
      "%llu), %llu of them refused cancel(), %llu pending slots not among them; stale cancels %llu, of "
      "which true %llu\n",
      ull(r.pending_slots), ull(r.returned), ull(r.stop_returned), ull(r.returned_cancel_false),
      ull(r.pending_not_returned), ull(r.stale_cancels), ull(r.stale_cancel_true));
  s += format(
      "            Engine::stats(): scheduled %llu, fired %llu, cancelled %llu, rejected %llu, rearmed %llu, "
      "skipped %llu, pending %llu, executing %llu, callback errors %llu\n",
      ull(e.scheduled), ull(e.fired), ull(e.cancelled), ull(e.rejected), ull(e.rearmed), ull(e.skipped),
      ull(e.pending), ull(e.executing), ull(e.callback_errors));
  if (!r.placement.warnings.empty()) {
    s += format(
        "WARNING     %zu warning(s) above: the lateness tail of this run measures the machine's "
        "scheduling as much as the engine\n",
        r.placement.warnings.size());
  }
  if (r.ok()) {
    s += "result      PASS: every timer fired exactly once, was cancelled, or was returned by stop()\n";
  } else {
    s += format("result      FAIL: %zu rule(s) broken\n", r.failures.size());
    for (const std::string& f : r.failures) s += "  - " + f + "\n";
  }
  out << s << std::flush;
}

std::string report_json(const Report& r) {
  const Options& o = r.options;
  std::ostringstream text;
  JsonWriter json(text);
  json.begin_object();
  json.field("tool", "tickwheel-stress");
  json.field("ok", r.ok());
  json.begin_array("failures");
  for (const std::string& f : r.failures) json.value(std::string_view(f));
  json.end_array();
  json.field("config", r.config);

  json.begin_object("options");
  json.field("profile", o.profile);
  json.field("timers", o.timers);
  json.field("producers", std::uint64_t{o.producers});
  json.field("schedule_rate", o.schedule_rate);
  json.field("cancel_share", o.cancel_share);
  json.field("reschedule_share", o.reschedule_share);
  json.field("cancellers", std::uint64_t{o.cancellers});
  json.field("delay", name_of(o.delay));
  json.field("delay_min_ns", o.delay_min_ns);
  json.field("delay_max_ns", o.delay_max_ns);
  json.field("delay_mean_ns", o.delay_mean_ns);
  json.field("delay_short_ns", o.delay_short_ns);
  json.field("delay_long_ns", o.delay_long_ns);
  json.field("short_share", o.short_share);
  json.field("periodic", o.periodic);
  json.field("period_ns", o.period_ns);
  json.field("periodic_policy", name_of(o.periodic_policy));
  json.field("periodic_cancel", o.periodic_cancel);
  json.field("misfire_every_ns", o.misfire_every_ns);
  json.field("repeated", std::uint64_t{o.repeated});
  json.field("burst", o.burst);
  json.field("burst_every_ns", o.burst_every_ns);
  json.field("duration_ns", o.duration_ns);
  json.field("seed", o.seed);
  json.field("shards", std::uint64_t{o.shards});
  json.field("tick_ns", o.tick_ns);
  json.field("wait", name_of(o.wait));
  json.field("transfer_cap", std::uint64_t{o.transfer_cap});
  json.field("pin", o.pin);
  json.field("max_pending", std::uint64_t{o.max_pending});
  json.field("executor", name_of(o.executor));
  json.field("pool_threads", std::uint64_t{o.pool_threads});
  json.field("threads", name_of(o.threads));
  json.field("lead_ns", o.lead_ns);
  json.field("rearm", o.rearm);
  json.field("fit", o.fit);
  json.field("worker_cpus", o.worker_cpus);
  json.field("producer_cpus", o.producer_cpus);
  json.field("control_cpu", std::int64_t{o.control_cpu});
  json.field("control", o.control);
  json.field("rt_priority", std::int64_t{o.rt_priority});
  json.field("mlock", o.mlock);
  json.end_object();

  const Platform& pf = r.platform;
  json.begin_object("platform");
  json.field("kernel", pf.kernel);
  json.field("clocksource", pf.clocksource);
  json.field("isolcpus", pf.isolcpus);
  json.field("nohz_full", pf.nohz_full);
  json.field("rcu_nocbs", pf.rcu_nocbs);
  json.field("isolated", format_cpu_list(pf.isolated));
  json.field("governor", pf.governor);
  json.field("thp", pf.thp);
  json.field("rt_runtime_us", pf.rt_runtime_us);
  json.field("rt_period_us", pf.rt_period_us);
  json.field("allowed_cpus", format_cpu_list(pf.allowed));
  json.begin_array("smt_siblings");
  for (const std::string& sib : pf.siblings) json.value(std::string_view(sib));
  json.end_array();
  json.field("loadavg_start", r.loadavg_start);
  json.field("loadavg_end", r.loadavg_end);
  json.begin_array("interrupts");
  for (const CpuIrq& c : r.interrupts) {
    json.begin_object();
    json.field("cpu", std::uint64_t{c.irq.cpu});
    json.field("role", c.role);
    json.field("known", c.irq.known);
    json.field("total", c.irq.total);
    json.begin_object("top");
    for (const auto& [name, n] : c.irq.top) json.field(name, n);
    json.end_object();
    json.end_object();
  }
  json.end_array();
  json.begin_array("threads");
  for (const ThreadInfo& t : r.threads) {
    json.begin_object();
    json.field("role", t.role);
    json.field("index", std::uint64_t{t.index});
    json.field("tid", std::int64_t{t.tid});
    json.field("cpus", t.cpus);
    json.field("known", t.switches.known);
    json.field("voluntary_switches", t.switches.voluntary);
    json.field("involuntary_switches", t.switches.involuntary);
    json.field("last_cpu", std::int64_t{t.switches.last_cpu});
    json.end_object();
  }
  json.end_array();
  json.end_object();

  json.begin_object("placement");
  json.field("workers",
             r.placement.workers.empty() ? std::string("any") : format_cpu_list(r.placement.workers));
  json.field("load", r.placement.load.empty() ? std::string("any") : format_cpu_list(r.placement.load));
  json.field("control", std::int64_t{r.placement.control});
  json.field("fitted", r.fitted);
  json.begin_array("warnings");
  for (const std::string& w : r.placement.warnings) json.value(std::string_view(w));
  json.end_array();
  json.end_object();

  json.begin_object("control");
  json.field("ran", r.control_ran);
  json.field("mode", o.wait == WaitStrategy::spin ? "spin" : "sleep");
  json.field("cpu", std::int64_t{r.placement.control});
  histogram_json(json, "lateness_ns", r.control);
  curve_json(json, "curve", r.control);
  json.end_object();

  json.begin_object("tick_lag");
  json.field("probes", r.tick_probes);
  histogram_json(json, "lag_ns", r.probe_lag);
  curve_json(json, "curve", r.probe_lag);
  json.begin_array("shards");
  for (std::size_t i = 0; i < r.shard_probes.size(); ++i) {
    json.begin_object();
    json.field("index", std::uint64_t{i});
    histogram_json(json, "lag_ns", r.shard_probes[i].lag);
    histogram_json(json, "fires_per_tick", r.shard_probes[i].fires_per_tick);
    curve_json(json, "curve", r.shard_probes[i].lag);
    json.end_object();
  }
  json.end_array();
  json.end_object();

  // Every pass of every shard (passes.hpp): the tick lag of all shards together, then each shard's.
  json.begin_object("passes");
  std::uint64_t passes = 0;
  for (const ShardPasses& p : r.shard_passes) passes += p.passes;
  json.field("count", passes);
  histogram_json(json, "tick_lag_ns", r.pass_lag);
  curve_json(json, "curve", r.pass_lag);
  json.begin_array("shards");
  for (std::size_t i = 0; i < r.shard_passes.size(); ++i) {
    const ShardPasses& p = r.shard_passes[i];
    json.begin_object();
    json.field("index", std::uint64_t{i});
    json.field("count", p.passes);
    json.field("per_second", per_second(p.passes, r.run_s));
    json.field("early", p.early);
    json.field("unplanned", p.unplanned);
    histogram_json(json, "tick_lag_ns", p.tick_lag);
    histogram_json(json, "duration_ns", p.duration);
    histogram_json(json, "fired", p.fired);
    histogram_json(json, "moved", p.moved);
    histogram_json(json, "transferred", p.transferred);
    histogram_json(json, "cancels", p.cancels);
    json.begin_object("totals");
    json.field("fired", p.fired_total);
    json.field("moved", p.moved_total);
    json.field("transferred", p.transferred_total);
    json.field("cancels", p.cancels_total);
    json.end_object();
    curve_json(json, "curve", p.tick_lag);
    json.end_object();
  }
  json.end_array();
  json.end_object();

  // Signed: what the engine adds above the control thread, per percentile (0 without a control).
  json.begin_array("floor");
  for (const FloorRow& row : floor_rows(r)) {
    json.begin_object();
    json.field("percentile", row.name);
    json.field("past_tick_ns", row.past_tick);
    json.field("tick_probe_ns", row.probe);
    json.field("control_ns", row.control);
    json.field("probe_minus_control_ns", r.control_ran ? row.probe - row.control : std::int64_t{0});
    json.field("past_tick_minus_control_ns", r.control_ran ? row.past_tick - row.control : std::int64_t{0});
    json.end_object();
  }
  json.end_array();

  json.begin_object("environment");
  json.field("clock_read_ns", r.clock_read_ns);
  json.field("clock_monotonic_offset_ns", r.clock_monotonic_offset_ns);
  json.field("hardware_threads", std::uint64_t{r.hardware_threads});
  json.field("shards", std::uint64_t{r.shards});
  json.field("producers", std::uint64_t{r.producers});
  json.field("cancellers", std::uint64_t{r.cancellers});
  json.end_object();

  json.begin_object("run");
  json.field("seconds", r.run_s);
  json.field("stop_seconds", r.stop_s);
  json.end_object();

  const double sched_ns = ns_per_call(r.schedule_ns, r.schedule_batches, r.schedule_calls, r.clock_read_ns);
  json.begin_object("schedule");
  json.field("calls", r.schedule_calls);
  json.field("scheduled", r.scheduled);
  json.field("per_second", per_second(r.scheduled, r.run_s));
  json.field("batches", r.schedule_batches);
  json.field("ns", r.schedule_ns);
  json.field("ns_per_call", sched_ns);
  status_json(json, "rejected", r.rejected);
  json.field("periodic_started", r.periodic_started);
  json.field("periodic_inexact", r.periodic_inexact);
  json.field("probes", r.probes);
  json.field("tick_probes", r.tick_probes);
  json.begin_object("bursts");
  json.field("count", r.bursts);
  json.field("calls", r.burst_calls);
  json.field("ns", r.burst_ns);
  json.field("max_ns", r.max_burst_ns);
  json.end_object();
  json.end_object();

  json.begin_object("cancel");
  json.field("calls", r.cancel_calls);
  json.field("returned_true", r.cancelled);
  json.field("returned_false", r.cancel_lost);
  json.field("by_cancellers", r.cancels_by_cancellers);
  json.field("per_second", per_second(r.cancel_calls, r.run_s));
  json.field("batches", r.cancel_batches);
  json.field("ns", r.cancel_ns);
  json.field("ns_per_call", ns_per_call(r.cancel_ns, r.cancel_batches, r.cancel_calls, r.clock_read_ns));
  json.end_object();

  json.begin_object("reschedule");
  json.field("calls", r.reschedule_calls);
  json.field("returned_true", r.rescheduled);
  json.field("returned_false", r.reschedule_refused);
  json.field("per_second", per_second(r.reschedule_calls, r.run_s));
  json.field("batches", r.reschedule_batches);
  json.field("ns", r.reschedule_ns);
  json.field("ns_per_call",
             ns_per_call(r.reschedule_ns, r.reschedule_batches, r.reschedule_calls, r.clock_read_ns));
  json.field("moved_fires", r.moved_fires);
  json.field("raced", r.moved_raced);
  json.end_object();

  json.begin_object("fire");
  json.field("count", r.fired);
  json.field("per_second", per_second(r.fired, r.run_s));
  json.field("periodic_runs", r.periodic_runs);
  json.field("min_lateness_ns", r.min_lateness_ns);
  histogram_json(json, "lateness_ns", r.lateness);
  histogram_json(json, "oneshot_lateness_ns", r.oneshot_lateness);
  histogram_json(json, "periodic_lateness_ns", r.periodic_lateness);
  histogram_json(json, "lateness_past_tick_ns", r.lateness_past_tick);
  curve_json(json, "lateness_curve", r.lateness);
  json.end_object();

  json.begin_object("periodic");
  json.begin_array("policies");
  for (std::size_t k = 0; k < kPeriodicKinds; ++k) {
    const PolicyReport& p = r.policies[k];
    json.begin_object();
    json.field("policy", name_of(static_cast<PeriodicPolicy>(k)));
    json.field("timers", p.timers);
    json.field("runs", p.runs);
    json.field("before_bound", p.before_bound);
    json.field("forced_misfires", p.forced);
    json.end_object();
  }
  json.end_array();
  json.field("cancelled", r.periodic_cancelled);
  json.field("cancel_refused", r.periodic_cancel_refused);
  json.field("runs_after_cancel", r.runs_after_cancel);
  json.field("forced_skips", r.forced_skips);
  json.field("skip_bound", r.skip_bound);
  json.end_object();

  const RepeatedReport& rt = r.repeated;
  json.begin_object("repeated");
  json.field("timers", rt.timers);
  json.field("starts", rt.starts);
  json.field("stops", rt.stops);
  json.field("restarts", rt.restarts);
  json.field("resets", rt.resets);
  json.field("refused", rt.refused);
  json.field("runs", rt.runs);
  json.field("begun_before_call", rt.begun_before);
  json.field("too_early", rt.too_early);
  json.field("while_stopped", rt.while_stopped);
  json.begin_object("engine");
  json.field("scheduled", rt.engine.scheduled);
  json.field("fired", rt.engine.fired);
  json.field("cancelled", rt.engine.cancelled);
  json.field("rejected", rt.engine.rejected);
  json.field("pending", rt.engine.pending);
  json.field("returned_at_stop", rt.returned);
  json.field("callback_errors", rt.engine.callback_errors);
  json.end_object();
  json.end_object();

  const EngineStats& e = r.engine;
  json.begin_object("engine");
  json.field("scheduled", e.scheduled);
  json.field("fired", e.fired);
  json.field("cancelled", e.cancelled);
  json.field("rejected", e.rejected);
  json.field("rearmed", e.rearmed);
  json.field("skipped", e.skipped);
  json.field("rescheduled", e.rescheduled);
  json.field("executing", e.executing);
  json.field("pending", e.pending);
  json.field("queue_depth", e.queue_depth);
  json.field("transfer_cap_hits", e.transfer_cap_hits);
  json.field("passes", e.passes);
  json.field("wakeups", e.wakeups);
  json.field("wakeups_per_second", per_second(e.wakeups, r.run_s));
  json.field("callback_errors", e.callback_errors);
  json.field("max_tick_lag_ns", e.max_tick_lag_ns);
  json.end_object();

  json.begin_array("shards");
  for (std::size_t i = 0; i < e.shards.size(); ++i) {
    const ShardStats& sh = e.shards[i];
    json.begin_object();
    json.field("index", std::uint64_t{i});
    json.field("binding", sh.binding);
    json.field("bound_cpu", std::int64_t{sh.bound_cpu});
    json.field("scheduled", sh.scheduled);
    json.field("fired", sh.fired);
    json.field("cancelled", sh.cancelled);
    json.field("rearmed", sh.rearmed);
    json.field("rejected", sh.rejected);
    json.field("transfer_cap_hits", sh.transfer_cap_hits);
    json.field("passes", sh.passes);
    json.field("wakeups", sh.wakeups);
    json.field("wakeups_per_second", per_second(sh.wakeups, r.run_s));
    json.field("max_tick_lag_ns", sh.max_tick_lag_ns);
    json.end_object();
  }
  json.end_array();

  json.begin_object("executor");
  json.field("kind", name_of(o.executor));
  json.field("pool_threads", std::uint64_t{pool_threads(r)});
  json.field("max_executing", r.max_executing);
  json.begin_array("threads");
  for (const ThreadReport& t : r.callback_threads) {
    json.begin_object();
    json.field("shard", t.shard);
    json.field("fired", t.fired);
    json.field("periodic_runs", t.periodic_runs);
    histogram_json(json, "lateness_ns", t.lateness);
    json.end_object();
  }
  json.end_array();
  json.end_object();

  json.begin_object("memory");
  json.field("rss_base_bytes", r.rss_base_bytes);
  json.field("rss_at_peak_bytes", r.rss_at_peak_bytes);
  json.field("calendar_bytes_at_peak", r.calendar_bytes_at_peak);
  json.field("peak_pending", r.peak_pending);
  json.field("bytes_per_pending", r.bytes_per_pending());
  json.field("peak_rss_bytes", r.peak_rss_bytes);
  json.field("harness_bytes", r.harness_bytes);
  json.end_object();

  json.begin_object("machine");
  json.field("voluntary_switches", r.voluntary_switches);
  json.field("involuntary_switches", r.involuntary_switches);
  json.field("loadavg_start", r.loadavg_start);
  json.field("loadavg_end", r.loadavg_end);
  json.end_object();

  json.begin_array("series");
  for (const Sample& x : r.series) {
    json.begin_object();
    json.field("t_s", x.t_s);
    json.field("scheduled_per_s", x.schedule_rate);
    json.field("cancelled_per_s", x.cancel_rate);
    json.field("fired_per_s", x.fire_rate);
    json.field("pending", x.pending);
    json.field("queued", x.queued);
    json.field("lateness_p99_ns", x.p99_ns);
    json.field("lateness_max_ns", x.max_ns);
    json.field("lateness_p99_so_far_ns", x.p99_so_far_ns);
    json.field("rss_bytes", x.rss_bytes);
    json.field("transfer_cap_hits", x.transfer_cap_hits);
    json.field("executing", x.executing);
    json.field("control_p99_ns", x.control_p99_ns);
    json.field("probe_p99_ns", x.probe_p99_ns);
    json.end_object();
  }
  json.end_array();

  json.begin_object("accounting");
  json.field("scheduled", r.total_scheduled());
  json.field("rearmed", r.periodic_runs);
  json.field("fired", r.fired);
  json.field("cancelled", r.total_cancelled());
  json.field("returned_at_stop", r.returned);
  json.field("stop_returned", r.stop_returned);
  json.field("rejected", r.total_rejected());
  json.field("probes", r.probes);
  json.field("double_fires", r.double_fires);
  json.field("overlapping_runs", r.overlapping_runs);
  json.field("fired_after_cancel", r.fired_after_cancel);
  json.field("stray_fires", r.stray_fires);
  json.field("early_fires", r.early_fires);
  json.field("fired_before_tick", r.fired_before_tick);
  json.field("cancel_true_not_pending", r.cancel_true_not_pending);
  json.field("moved_early", r.moved_early);
  json.field("refused_pending", r.refused_pending);
  json.field("off_shard", r.off_shard);
  json.field("probe_failures", r.probe_failures);
  json.field("unrecorded_fires", r.unrecorded_fires);
  json.field("pending_slots", r.pending_slots);
  json.field("returned_cancel_false", r.returned_cancel_false);
  json.field("pending_not_returned", r.pending_not_returned);
  json.field("stale_cancels", r.stale_cancels);
  json.field("stale_cancel_true", r.stale_cancel_true);
  json.field("callback_errors", e.callback_errors);
  json.field("periodic_cancel_refused", r.periodic_cancel_refused);
  std::uint64_t before_bound = 0;
  for (const PolicyReport& p : r.policies) before_bound += p.before_bound;
  json.field("periodic_before_bound", before_bound);
  json.field("repeated_too_early", rt.too_early);
  json.field("repeated_while_stopped", rt.while_stopped);
  json.field("repeated_refused", rt.refused);
  json.end_object();

  json.begin_array("notices");
  for (const std::string& n : r.notices) json.value(std::string_view(n));
  json.end_array();

  json.end_object();
  json.finish();
  return text.str();
}

}  // namespace tickwheel::stress
