// stress/report.cpp — the accounting rules, the text report and the JSON dump of a stress run.
#include "report.hpp"

#include <cstdarg>
#include <cstdio>
#include <string_view>
#include <utility>

#include "json.hpp"

namespace tickwheel::stress {

namespace {

// The percentiles the report prints, with their JSON key; max is added separately.
constexpr std::pair<double, std::string_view> kPercentiles[] = {
    {50.0, "p50"}, {90.0, "p90"}, {99.0, "p99"}, {99.9, "p99_9"}, {99.99, "p99_99"}};

[[gnu::format(printf, 1, 2)]] std::string printf_string(const char* fmt, ...);
std::string printf_string(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }
double us(std::uint64_t ns) { return static_cast<double>(ns) / 1e3; }
double per_second(std::uint64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}
// A batch's bracket holds the batch and one clock read (t0's read returns before the batch, t1's
// read is inside the bracket): the batch time net of that read, from the measured read cost.
double net_seconds(std::int64_t ns, std::uint64_t batches, double read_ns) {
  const double net = static_cast<double>(ns) - static_cast<double>(batches) * read_ns;
  return net > 0 ? net / 1e9 : 0.0;
}
double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// "p50 12.345  p90 ...  max ...  (n = ...)" in microseconds.
std::string percentile_line(const Histogram& h, bool all_percentiles) {
  std::string line;
  for (const auto& [p, name] : kPercentiles) {
    if (!all_percentiles && p != 50.0 && p != 99.0) continue;
    line += printf_string("%.*s %.3f  ", static_cast<int>(name.size()), name.data(),
                          us(h.percentile(p)));
  }
  line += printf_string("max %.3f  mean %.3f  (n = %llu)", us(h.max()), h.mean() / 1e3,
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

void rule(Report& r, bool broken, std::string message) {
  if (broken) r.failures.push_back(std::move(message));
}

}  // namespace

std::string format_duration(std::int64_t ns) {
  static constexpr std::pair<std::int64_t, const char*> kUnits[] = {
      {3'600'000'000'000, "h"}, {60'000'000'000, "min"}, {1'000'000'000, "s"},
      {1'000'000, "ms"},        {1'000, "us"}};
  for (const auto& [size, name] : kUnits) {
    if (ns != 0 && ns % size == 0) return std::to_string(ns / size) + name;
  }
  return std::to_string(ns) + "ns";
}

void check_accounting(Report& r) {
  r.failures.clear();
  rule(r, r.gave_up,
       printf_string("gave up %s after the last deadline with %llu timers still pending: the wheel "
                     "lost them",
                     format_duration(r.options.give_up_ns).c_str(), ull(r.pending_end)));
  rule(r, r.rejected != 0,
       printf_string("%llu schedules were rejected (first: %s)", ull(r.rejected),
                     r.reject_reason.c_str()));
  rule(r, r.scheduled != r.fired + r.cancelled + r.pending_end,
       printf_string("scheduled %llu != fired %llu + cancelled %llu + pending %llu", ull(r.scheduled),
                     ull(r.fired), ull(r.cancelled), ull(r.pending_end)));
  rule(r, r.pending_end != 0,
       printf_string("%llu timers still pending at the end", ull(r.pending_end)));
  rule(r, r.double_fires != 0,
       printf_string("%llu callbacks ran for a timer that had already fired", ull(r.double_fires)));
  rule(r, r.fired_after_cancel != 0,
       printf_string("%llu callbacks ran for a timer whose cancel() had returned true",
                     ull(r.fired_after_cancel)));
  rule(r, r.early_fires != 0,
       printf_string("%llu callbacks started before their deadline (earliest by %lld ns)",
                     ull(r.early_fires), static_cast<long long>(-r.min_lateness_ns)));
  rule(r, r.fired_before_tick != 0,
       printf_string("%llu timers fired in an advance(now) with now before their deadline rounded "
                     "up to the tick",
                     ull(r.fired_before_tick)));
  rule(r, r.fired_a_pass_late != 0,
       printf_string("%llu timers were not fired by the first advance(now) with now at or past their "
                     "deadline rounded up to the tick, but by a later one",
                     ull(r.fired_a_pass_late)));
  rule(r, r.cancel_true_not_pending != 0,
       printf_string("%llu cancel() calls returned true for a timer that was not pending",
                     ull(r.cancel_true_not_pending)));
  rule(r, r.cancel_false_pending != 0,
       printf_string("%llu cancel() calls returned false for a timer that was still pending",
                     ull(r.cancel_false_pending)));
  rule(r, r.stale_cancel_true != 0,
       printf_string("%llu of %llu cancel() calls on stale ids (fired or cancelled) returned true",
                     ull(r.stale_cancel_true), ull(r.stale_cancels)));
  rule(r, r.state_other != 0,
       printf_string("%llu timers ended neither fired nor cancelled", ull(r.state_other)));
  rule(r, r.state_fired != r.fired || r.state_cancelled != r.cancelled,
       printf_string("per-timer states (fired %llu, cancelled %llu) disagree with the counters "
                     "(fired %llu, cancelled %llu)",
                     ull(r.state_fired), ull(r.state_cancelled), ull(r.fired), ull(r.cancelled)));
  rule(r, r.ran_before_next_deadline != 0,
       printf_string("%llu advance(now) passes ran callbacks although next_deadline() was after now",
                     ull(r.ran_before_next_deadline)));
  rule(r, r.next_deadline_missing != 0,
       printf_string("%llu times next_deadline() was empty while timers were pending",
                     ull(r.next_deadline_missing)));
  rule(r, r.pending_mismatch != 0,
       printf_string("%llu status checks found pending() != scheduled - fired - cancelled",
                     ull(r.pending_mismatch)));
  rule(r,
       r.wheel_scheduled != r.scheduled || r.wheel_fired != r.fired ||
           r.wheel_cancelled != r.cancelled || r.wheel_rejected != r.rejected ||
           r.wheel_passes != r.passes,
       printf_string("wheel stats() (scheduled %llu, fired %llu, cancelled %llu, rejected %llu, "
                     "passes %llu) disagree with the harness (%llu, %llu, %llu, %llu, %llu)",
                     ull(r.wheel_scheduled), ull(r.wheel_fired), ull(r.wheel_cancelled),
                     ull(r.wheel_rejected), ull(r.wheel_passes), ull(r.scheduled), ull(r.fired),
                     ull(r.cancelled), ull(r.rejected), ull(r.passes)));
}

void print_report(const Report& r, std::ostream& out) {
  const Options& o = r.options;
  const double sched_s = static_cast<double>(r.schedule_ns) / 1e9;
  const double cancel_s = static_cast<double>(r.cancel_ns) / 1e9;
  std::string s;
  s += printf_string(
      "tickwheel-stress: %llu timers, delay %s..%s, cancel share %g, tick %s, wait %s, "
      "schedule rate %g/s%s, batch %llu, seed %llu\n",
      ull(o.timers), format_duration(o.delay_min_ns).c_str(),
      format_duration(o.delay_max_ns).c_str(), o.cancel_share, format_duration(o.tick_ns).c_str(),
      std::string(name_of(o.wait)).c_str(), o.schedule_rate,
      o.schedule_rate > 0 ? "" : " (all up front)", ull(o.batch), ull(o.seed));
  s += printf_string(
      "clock       steady_clock::now() %.1f ns/read; |steady_clock - CLOCK_MONOTONIC| %lld ns; "
      "timer slack %lld ns\n",
      r.clock_read_ns, static_cast<long long>(r.clock_monotonic_offset_ns),
      static_cast<long long>(r.timer_slack_ns));
  s += printf_string("run         %.3f s from the first schedule to the last timer resolved%s\n",
                     r.run_s, r.gave_up ? " (GAVE UP with timers pending)" : "");
  s += printf_string(
      "schedule    %llu timers in %.3f ms inside schedule_at() (%llu batches): %.2f M/s, %.2f M/s "
      "net of one clock read per batch; %llu rejected\n",
      ull(r.scheduled), sched_s * 1e3, ull(r.schedule_batches),
      per_second(r.scheduled, sched_s) / 1e6,
      per_second(r.scheduled, net_seconds(r.schedule_ns, r.schedule_batches, r.clock_read_ns)) / 1e6,
      ull(r.rejected));
  s += printf_string(
      "cancel      %llu calls in %.3f ms inside cancel() (%llu batches): %.2f M/s, %.2f M/s net of "
      "one clock read per batch; %llu true, %llu false\n",
      ull(r.cancel_calls), cancel_s * 1e3, ull(r.cancel_batches),
      per_second(r.cancel_calls, cancel_s) / 1e6,
      per_second(r.cancel_calls, net_seconds(r.cancel_ns, r.cancel_batches, r.clock_read_ns)) / 1e6,
      ull(r.cancelled), ull(r.cancel_false));
  s += printf_string("fire        %llu fired\n", ull(r.fired));
  s += "  lateness, callback start - deadline (us):\n    " +
       percentile_line(r.lateness, true) + "\n";
  s += "  past the tick, callback start - deadline rounded up to the tick (us):\n    " +
       percentile_line(r.lateness_past_tick, true) + "\n";
  s += "tick lag    pass start - first due deadline (next_deadline()), passes with work due (us):\n"
       "    " + percentile_line(r.tick_lag, false) + "\n";
  s += "pass cost   pass start - advance() return, passes with work (us):\n    " +
       percentile_line(r.pass_cost, false) + "\n";
  s += printf_string(
      "passes      %llu (%.0f/s), %llu with work due (%.0f/s); wake-ups %llu (%.0f/s), %llu of them "
      "(%.0f/s) aimed at next_deadline()\n",
      ull(r.passes), per_second(r.passes, r.run_s), ull(r.passes_due),
      per_second(r.passes_due, r.run_s), ull(r.wakeups), per_second(r.wakeups, r.run_s),
      ull(r.wakeups_for_wheel), per_second(r.wakeups_for_wheel, r.run_s));
  if (r.wakeups != 0) {
    s += "  oversleep, wake-up - time asked for (us):\n    " +
         percentile_line(r.oversleep, false) + "\n";
  }
  s += printf_string(
      "memory      wheel stats().bytes %.1f MiB for %llu peak pending = %.1f B/timer; pool %llu "
      "nodes touched of %llu mapped in %llu segments\n"
      "            harness arrays %.1f MiB; peak RSS %.1f MiB (whole process)\n",
      mib(r.wheel_bytes), ull(r.peak_pending),
      r.peak_pending ? static_cast<double>(r.wheel_bytes) / static_cast<double>(r.peak_pending) : 0.0,
      ull(r.pool_nodes), ull(r.pool_capacity), ull(r.pool_segments), mib(r.harness_bytes),
      mib(r.peak_rss_bytes));
  s += printf_string(
      "machine     context switches during the run: %llu voluntary, %llu involuntary "
      "(preempted); load average (1 min) %.2f at the start, %.2f at the end\n",
      ull(r.voluntary_switches), ull(r.involuntary_switches), r.loadavg_start, r.loadavg_end);
  s += printf_string("wheel       moved down %llu (%llu ahead of time); most fires + moves in one "
                     "pass %llu\n",
                     ull(r.moved), ull(r.moved_ahead), ull(r.max_pass_work));
  s += printf_string("accounting  scheduled %llu = fired %llu + cancelled %llu + pending %llu\n",
                     ull(r.scheduled), ull(r.fired), ull(r.cancelled), ull(r.pending_end));
  s += printf_string(
      "            double fires %llu, fired after cancel %llu, early fires %llu (min lateness "
      "%.3f us), fired before the tick %llu, fired a pass late %llu\n",
      ull(r.double_fires), ull(r.fired_after_cancel), ull(r.early_fires),
      static_cast<double>(r.min_lateness_ns) / 1e3, ull(r.fired_before_tick),
      ull(r.fired_a_pass_late));
  s += printf_string(
      "            cancel true on a resolved timer %llu, false on a pending one %llu; stale "
      "cancels %llu, of which true %llu; picks found already resolved %llu\n",
      ull(r.cancel_true_not_pending), ull(r.cancel_false_pending), ull(r.stale_cancels),
      ull(r.stale_cancel_true), ull(r.cancels_unattempted));
  s += printf_string(
      "            wheel stats(): scheduled %llu, fired %llu, cancelled %llu, rejected %llu, "
      "passes %llu\n",
      ull(r.wheel_scheduled), ull(r.wheel_fired), ull(r.wheel_cancelled), ull(r.wheel_rejected),
      ull(r.wheel_passes));
  if (r.ok()) {
    s += "result      PASS: every timer fired exactly once or was cancelled\n";
  } else {
    s += printf_string("result      FAIL: %zu rule(s) broken\n", r.failures.size());
    for (const std::string& f : r.failures) s += "  - " + f + "\n";
  }
  out << s << std::flush;
}

void write_json(const Report& r, std::ostream& out) {
  const Options& o = r.options;
  const double sched_s = static_cast<double>(r.schedule_ns) / 1e9;
  const double cancel_s = static_cast<double>(r.cancel_ns) / 1e9;
  JsonWriter json(out);
  json.begin_object();
  json.field("tool", "tickwheel-stress");
  json.field("ok", r.ok());
  json.begin_array("failures");
  for (const std::string& f : r.failures) json.value(std::string_view(f));
  json.end_array();

  json.begin_object("options");
  json.field("timers", o.timers);
  json.field("cancel_share", o.cancel_share);
  json.field("delay_min_ns", o.delay_min_ns);
  json.field("delay_max_ns", o.delay_max_ns);
  json.field("tick_ns", o.tick_ns);
  json.field("wait", name_of(o.wait));
  json.field("schedule_rate", o.schedule_rate);
  json.field("batch", o.batch);
  json.field("seed", o.seed);
  json.field("give_up_ns", o.give_up_ns);
  json.end_object();

  json.begin_object("clock");
  json.field("read_ns", r.clock_read_ns);
  json.field("monotonic_offset_ns", r.clock_monotonic_offset_ns);
  json.field("timer_slack_ns", r.timer_slack_ns);
  json.end_object();

  json.begin_object("run");
  json.field("seconds", r.run_s);
  json.field("gave_up", r.gave_up);
  json.end_object();

  json.begin_object("schedule");
  json.field("count", r.scheduled);
  json.field("batches", r.schedule_batches);
  json.field("ns", r.schedule_ns);
  json.field("per_second", per_second(r.scheduled, sched_s));
  json.field("per_second_net_of_clock",
             per_second(r.scheduled, net_seconds(r.schedule_ns, r.schedule_batches, r.clock_read_ns)));
  json.field("rejected", r.rejected);
  json.end_object();

  json.begin_object("cancel");
  json.field("calls", r.cancel_calls);
  json.field("returned_true", r.cancelled);
  json.field("returned_false", r.cancel_false);
  json.field("batches", r.cancel_batches);
  json.field("ns", r.cancel_ns);
  json.field("per_second", per_second(r.cancel_calls, cancel_s));
  json.field("per_second_net_of_clock",
             per_second(r.cancel_calls, net_seconds(r.cancel_ns, r.cancel_batches, r.clock_read_ns)));
  json.field("picks_found_resolved", r.cancels_unattempted);
  json.end_object();

  json.begin_object("fire");
  json.field("count", r.fired);
  json.field("min_lateness_ns", r.min_lateness_ns);
  histogram_json(json, "lateness_ns", r.lateness);
  histogram_json(json, "lateness_past_tick_ns", r.lateness_past_tick);
  json.end_object();

  json.begin_object("passes");
  json.field("count", r.passes);
  json.field("with_work_due", r.passes_due);
  json.field("per_second", per_second(r.passes, r.run_s));
  json.field("wakeups", r.wakeups);
  json.field("wakeups_per_second", per_second(r.wakeups, r.run_s));
  json.field("wakeups_for_wheel", r.wakeups_for_wheel);
  histogram_json(json, "tick_lag_ns", r.tick_lag);
  histogram_json(json, "pass_cost_ns", r.pass_cost);
  histogram_json(json, "oversleep_ns", r.oversleep);
  json.end_object();

  json.begin_object("memory");
  json.field("wheel_bytes", r.wheel_bytes);
  json.field("peak_pending", r.peak_pending);
  json.field("wheel_bytes_per_peak_pending",
             r.peak_pending ? static_cast<double>(r.wheel_bytes) / static_cast<double>(r.peak_pending)
                            : 0.0);
  json.field("pool_nodes", r.pool_nodes);
  json.field("pool_capacity", r.pool_capacity);
  json.field("pool_segments", r.pool_segments);
  json.field("harness_bytes", r.harness_bytes);
  json.field("peak_rss_bytes", r.peak_rss_bytes);
  json.end_object();

  json.begin_object("machine");
  json.field("voluntary_switches", r.voluntary_switches);
  json.field("involuntary_switches", r.involuntary_switches);
  json.field("loadavg_start", r.loadavg_start);
  json.field("loadavg_end", r.loadavg_end);
  json.end_object();

  json.begin_object("wheel");
  json.field("scheduled", r.wheel_scheduled);
  json.field("fired", r.wheel_fired);
  json.field("cancelled", r.wheel_cancelled);
  json.field("rejected", r.wheel_rejected);
  json.field("passes", r.wheel_passes);
  json.field("moved", r.moved);
  json.field("moved_ahead", r.moved_ahead);
  json.field("max_pass_work", r.max_pass_work);
  json.end_object();

  json.begin_object("accounting");
  json.field("scheduled", r.scheduled);
  json.field("fired", r.fired);
  json.field("cancelled", r.cancelled);
  json.field("pending_end", r.pending_end);
  json.field("double_fires", r.double_fires);
  json.field("fired_after_cancel", r.fired_after_cancel);
  json.field("early_fires", r.early_fires);
  json.field("fired_before_tick", r.fired_before_tick);
  json.field("fired_a_pass_late", r.fired_a_pass_late);
  json.field("cancel_true_not_pending", r.cancel_true_not_pending);
  json.field("cancel_false_pending", r.cancel_false_pending);
  json.field("stale_cancels", r.stale_cancels);
  json.field("stale_cancel_true", r.stale_cancel_true);
  json.field("state_fired", r.state_fired);
  json.field("state_cancelled", r.state_cancelled);
  json.field("state_other", r.state_other);
  json.field("ran_before_next_deadline", r.ran_before_next_deadline);
  json.field("next_deadline_missing", r.next_deadline_missing);
  json.field("pending_mismatch", r.pending_mismatch);
  json.end_object();

  json.end_object();
  json.finish();
}

}  // namespace tickwheel::stress
