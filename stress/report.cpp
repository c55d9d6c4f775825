// stress/report.cpp — the accounting rules and the JSON document of a stress run (stress/plot.py prints
// the text report from it).
#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string_view>
#include <utility>

#include "format.hpp"

namespace tickwheel::stress {

namespace {

// The percentiles the report prints, with their JSON key; max is added separately.
constexpr std::pair<double, std::string_view> kPercentiles[] = {
    {50.0, "p50"}, {90.0, "p90"}, {99.0, "p99"}, {99.9, "p99_9"}, {99.99, "p99_99"}};

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }
double per_second(std::uint64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}
// Threads of the executor's pool, 0 without one.
std::size_t pool_threads(const Report& r) {
  return r.options.executor == ExecutorKind::pool ? r.options.pool_threads : 0;
}

void rule(Report& r, bool broken, std::string message) {
  if (broken) r.failures.push_back(std::move(message));
}
// A counter that must stay zero; its rule's message is the count, then `what`.
void zero(Report& r, std::uint64_t count, const char* what) {
  rule(r, count != 0, format("%llu %s", ull(count), what));
}

// Every timer accounted for once: fires, cancels, moves, and what stop() handed back.
void check_fires_and_stop(Report& r) {
  const std::uint64_t scheduled = r.total_scheduled();
  const std::uint64_t cancelled = r.total_cancelled();
  rule(r, scheduled + r.periodic_runs != r.fired + cancelled + r.returned,
       format("scheduled %llu + periodic runs %llu != fired %llu + cancelled %llu + returned at stop %llu "
              "(a timer was lost or counted twice)",
              ull(scheduled), ull(r.periodic_runs), ull(r.fired), ull(cancelled), ull(r.returned)));
  zero(r, r.double_fires, "callbacks ran for a timer that had already fired");
  zero(r, r.overlapping_runs, "periodic runs started while another run of the same timer ran");
  rule(r, r.unrecorded_fires != 0,
       format("%llu callbacks ran on a thread beyond the %zu workers and %zu pool threads, unrecorded "
              "(other rules may break with them)",
              ull(r.unrecorded_fires), r.shards, pool_threads(r)));
  zero(r, r.fired_after_cancel, "callbacks ran for a timer whose cancel() had returned true");
  zero(r, r.stray_fires,
       "callbacks ran for a timer instance that was no longer the slot's own (resolved before, or never "
       "scheduled)");
  rule(r, r.early_fires != 0,
       format("%llu callbacks started before their deadline (earliest by %lld ns)", ull(r.early_fires),
              static_cast<long long>(-r.min_lateness_ns)));
  zero(r, r.fired_before_tick, "callbacks started before their deadline rounded up to the tick");
  zero(r, r.cancel_true_not_pending, "cancel() calls returned true for a timer that had already fired");
  zero(r, r.moved_early,
       "rescheduled timers fired before the deadline a reschedule() that returned true gave them (rounded "
       "up to the tick), though the deadline before it had not come when it returned");
  zero(r, r.refused_pending,
       "reschedule() calls returned false for a timer whose deadline had not come, which no pass could "
       "have claimed");
  rule(r, r.engine.rescheduled > r.rescheduled || r.rescheduled < r.engine.rescheduled + r.moved_raced,
       format("Engine::stats().rescheduled is %llu: more than the %llu reschedule() calls that returned "
              "true, or more than those less the %llu moves a fire at the deadline before won (each "
              "such move is dropped)",
              ull(r.engine.rescheduled), ull(r.rescheduled), ull(r.moved_raced)));
  zero(r, r.off_shard, "timers landed on another shard than their thread's home shard");
  zero(r, r.probe_failures, "probe timers (an hour out) could not be cancelled");
  rule(r, r.pending_slots != r.returned,
       format("%llu slots were pending after stop() but stop() returned %llu timers", ull(r.pending_slots),
              ull(r.returned)));
  zero(r, r.returned_cancel_false, "timers stop() returned refused cancel(), so they were not pending");
  zero(r, r.pending_not_returned, "pending slots' timers were not among those stop() returned");
  rule(r, r.stale_cancel_true != 0,
       format("%llu of %llu cancel() calls on stale handles (fired or cancelled) returned true",
              ull(r.stale_cancel_true), ull(r.stale_cancels)));
  rule(r, r.stop_returned != r.returned,
       format("Engine::stop(visit) returned %llu but handed %llu timers to its visitor", ull(r.stop_returned),
              ull(r.returned)));
}

// The engine's own counters against the harness's, the periodic and repeated timers, the executor.
void check_engine_and_timers(Report& r) {
  const std::uint64_t scheduled = r.total_scheduled();
  const std::uint64_t cancelled = r.total_cancelled();
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
  for (std::size_t k = 0; k < kPeriodicKinds; ++k) zero(r, r.policies[k].before_bound, kBroken[k]);
  zero(r, r.periodic_cancel_refused,
       "cancel() calls on periodic timers returned false, though each timer was cancelled once");
  const RepeatedReport& rt = r.repeated;
  zero(r, rt.too_early,
       "RepeatedTimer runs started sooner than the timeout after their start, restart, reset or the "
       "previous run's end");
  zero(r, rt.while_stopped,
       "RepeatedTimer runs started while stopped, beyond the one begun before stop() returned");
  zero(r, rt.refused,
       "RepeatedTimer calls returned false, though none was destroyed and its engine refuses nothing");
  rule(r, rt.returned != 0 || rt.engine.pending != 0,
       format("the repeated timers' engine handed back %llu timers (pending %llu) after every RepeatedTimer "
              "was destroyed, which cancels its armed timer",
              ull(rt.returned), ull(rt.engine.pending)));
  rule(r, rt.engine.scheduled != rt.engine.fired + rt.engine.cancelled || rt.engine.fired < rt.runs,
       format("the repeated timers' engine: scheduled %llu != fired %llu + cancelled %llu, or fewer fires "
              "than the %llu runs seen",
              ull(rt.engine.scheduled), ull(rt.engine.fired), ull(rt.engine.cancelled), ull(rt.runs)));
  zero(r, rt.engine.callback_errors, "RepeatedTimer callbacks threw, though the harness's cannot");
  rule(
      r, e.executing != 0,
      format("Engine::stats().executing is %llu after stop(), which waits for every task", ull(e.executing)));
  rule(r, r.options.executor == ExecutorKind::inline_ && r.max_executing != 0,
       format("Engine::stats().executing reached %llu with no executor", ull(r.max_executing)));
  zero(r, e.callback_errors, "callbacks threw, though none of the harness's can");
}

}  // namespace

void check_accounting(Report& r) {
  r.failures.clear();
  check_fires_and_stop(r);
  check_engine_and_timers(r);
}

Json histogram_json(const Histogram& h) {
  Json j = {{"count", h.count()}, {"min", h.min()}, {"mean", h.mean()}};
  for (const auto& [p, name] : kPercentiles) j[std::string(name)] = h.percentile(p);
  j["max"] = h.max();
  return j;
}

Json histogram_json(const ConcurrentHistogram& h) {
  auto snapshot = std::make_unique<Histogram>();
  h.add_to(*snapshot);
  return histogram_json(*snapshot);
}

// Points at p = 1 - 10^(-k/10), i.e. ten per decade of 1 / (1 - p), up to the last decade the
// sample count resolves, then the maximum at 1 - 1/n.
Json curve_json(const Histogram& h) {
  Json curve = Json::array();
  const auto n = static_cast<double>(h.count());
  for (int k = 0; n > 0 && std::pow(10.0, k / 10.0) < n; ++k) {
    const double p = 100.0 * (1.0 - std::pow(10.0, -k / 10.0));
    curve.push_back({{"percentile", p}, {"ns", h.percentile(p)}});
  }
  if (n > 0) curve.push_back({{"percentile", 100.0 * (1.0 - 1.0 / n)}, {"ns", h.max()}});
  return curve;
}

namespace {

// Calls, what they returned (`results`), `done` per second, then batches and the time inside them;
// ns per call net of the one clock read each timed bracket holds (the first read returns before the
// calls, the second is inside the bracket).
Json calls_json(const Report& r, const CallTotals& c, const Json& results, std::uint64_t done) {
  const double net = static_cast<double>(c.ns) - static_cast<double>(c.batches) * r.clock_read_ns;
  Json j = {{"calls", c.calls}};
  j.update(results);
  j.update({{"per_second", per_second(done, r.run_s)},
            {"batches", c.batches},
            {"ns", c.ns},
            {"ns_per_call", c.calls == 0 ? 0.0 : (net > 0 ? net : 0.0) / static_cast<double>(c.calls)}});
  return j;
}

// Signed, per percentile: the engine's lateness past the tick, the tick probes' lag, the control
// thread's lateness, cyclictest's, and what the engine adds above the control (0 without one).
Json floor_json(const Report& r) {
  Json rows = Json::array();
  auto row = [&](std::string_view name, auto at) {
    const auto past_tick = static_cast<std::int64_t>(at(r.lateness_past_tick));
    const auto probe = static_cast<std::int64_t>(at(r.probe_lag));
    const auto control = static_cast<std::int64_t>(at(r.control));
    rows.push_back({{"percentile", name},
                    {"past_tick_ns", past_tick},
                    {"tick_probe_ns", probe},
                    {"control_ns", control},
                    {"cyclictest_ns", static_cast<std::int64_t>(at(r.cyclictest.latency))},
                    {"probe_minus_control_ns", r.control_ran ? probe - control : 0},
                    {"past_tick_minus_control_ns", r.control_ran ? past_tick - control : 0}});
  };
  for (const auto& [p, name] : kPercentiles)
    row(name, [p = p](const Histogram& h) { return h.percentile(p); });
  row("max", [](const Histogram& h) { return h.max(); });
  return rows;
}

// Every failure reason the Status enum names (it is contiguous from ok), each with its count.
Json status_json(const StatusCounts& c) {
  Json j = Json::object();
  for (std::size_t k = 1; k < c.size() && to_string(static_cast<Status>(k)) != "unknown"; ++k) {
    j[std::string(to_string(static_cast<Status>(k)))] = c[k];
  }
  return j;
}

Json schedule_json(const Report& r) {
  Json j = calls_json(r, r.schedule, {{"scheduled", r.scheduled}}, r.scheduled);
  j.update(
      {{"rejected", status_json(r.rejected)},
       {"periodic_started", r.periodic_started},
       {"periodic_inexact", r.periodic_inexact},
       {"probes", r.probes},
       {"tick_probes", r.tick_probes},
       {"bursts",
        {{"count", r.bursts}, {"calls", r.burst_calls}, {"ns", r.burst_ns}, {"max_ns", r.max_burst_ns}}}});
  return j;
}

Json cancel_and_reschedule_json(const Report& r) {
  const Json cancel = calls_json(r, r.cancel,
                                 {{"returned_true", r.cancelled},
                                  {"returned_false", r.cancel_lost},
                                  {"by_cancellers", r.cancels_by_cancellers}},
                                 r.cancel.calls);
  Json reschedule = calls_json(r, r.reschedule,
                               {{"returned_true", r.rescheduled}, {"returned_false", r.reschedule_refused}},
                               r.reschedule.calls);
  reschedule.update({{"moved_fires", r.moved_fires}, {"raced", r.moved_raced}});
  return {{"cancel", cancel}, {"reschedule", reschedule}};
}

Json fire_json(const Report& r) {
  return {{"count", r.fired},
          {"per_second", per_second(r.fired, r.run_s)},
          {"periodic_runs", r.periodic_runs},
          {"min_lateness_ns", r.min_lateness_ns},
          {"lateness_ns", histogram_json(r.lateness)},
          {"oneshot_lateness_ns", histogram_json(r.oneshot_lateness)},
          {"periodic_lateness_ns", histogram_json(r.periodic_lateness)},
          {"lateness_past_tick_ns", histogram_json(r.lateness_past_tick)},
          {"lateness_curve", curve_json(r.lateness)}};
}

Json periodic_json(const Report& r) {
  Json policies = Json::array();
  for (std::size_t k = 0; k < kPeriodicKinds; ++k) {
    const PolicyCounts& p = r.policies[k];
    policies.push_back({{"policy", name_of(static_cast<PeriodicPolicy>(k))},
                        {"timers", p.timers},
                        {"runs", p.runs},
                        {"before_bound", p.before_bound},
                        {"forced_misfires", p.forced}});
  }
  return {{"policies", policies},
          {"cancelled", r.periodic_cancelled},
          {"cancel_refused", r.periodic_cancel_refused},
          {"runs_after_cancel", r.runs_after_cancel},
          {"forced_skips", r.forced_skips},
          {"skip_bound", r.skip_bound}};
}

Json repeated_json(const RepeatedReport& rt) {
  return {{"timers", rt.timers},
          {"starts", rt.starts},
          {"stops", rt.stops},
          {"restarts", rt.restarts},
          {"resets", rt.resets},
          {"refused", rt.refused},
          {"runs", rt.runs},
          {"begun_before_call", rt.begun_before},
          {"too_early", rt.too_early},
          {"while_stopped", rt.while_stopped},
          {"engine",
           {{"scheduled", rt.engine.scheduled},
            {"fired", rt.engine.fired},
            {"cancelled", rt.engine.cancelled},
            {"rejected", rt.engine.rejected},
            {"pending", rt.engine.pending},
            {"returned_at_stop", rt.returned},
            {"callback_errors", rt.engine.callback_errors}}}};
}

Json engine_json(const Report& r) {
  const EngineStats& e = r.engine;
  return {{"scheduled", e.scheduled},
          {"fired", e.fired},
          {"fired_at_schedule", e.fired_at_schedule},
          {"cancelled", e.cancelled},
          {"rejected", e.rejected},
          {"rearmed", e.rearmed},
          {"skipped", e.skipped},
          {"rescheduled", e.rescheduled},
          {"executing", e.executing},
          {"pending", e.pending},
          {"queue_depth", e.queue_depth},
          {"transfer_cap_hits", e.transfer_cap_hits},
          {"passes", e.passes},
          {"wakeups", e.wakeups},
          {"wakeups_per_second", per_second(e.wakeups, r.run_s)},
          {"callback_errors", e.callback_errors},
          {"max_tick_lag_ns", e.max_tick_lag_ns}};
}

Json shards_json(const Report& r) {
  Json shards = Json::array();
  for (std::size_t i = 0; i < r.engine.shards.size(); ++i) {
    const ShardStats& sh = r.engine.shards[i];
    shards.push_back({{"index", i},
                      {"binding", sh.binding},
                      {"bound_cpu", sh.bound_cpu},
                      {"scheduled", sh.scheduled},
                      {"fired", sh.fired},
                      {"fired_at_schedule", sh.fired_at_schedule},
                      {"cancelled", sh.cancelled},
                      {"rearmed", sh.rearmed},
                      {"rejected", sh.rejected},
                      {"transfer_cap_hits", sh.transfer_cap_hits},
                      {"passes", sh.passes},
                      {"wakeups", sh.wakeups},
                      {"wakeups_per_second", per_second(sh.wakeups, r.run_s)},
                      {"max_tick_lag_ns", sh.max_tick_lag_ns}});
  }
  return shards;
}

Json memory_json(const Report& r) {
  const std::uint64_t overhead = r.rss_base_bytes + r.calendar_bytes_at_peak;
  const double per_pending =
      r.peak_pending == 0 || r.rss_at_peak_bytes <= overhead
          ? 0.0
          : static_cast<double>(r.rss_at_peak_bytes - overhead) / static_cast<double>(r.peak_pending);
  return {{"rss_base_bytes", r.rss_base_bytes},
          {"rss_at_peak_bytes", r.rss_at_peak_bytes},
          {"calendar_bytes_at_peak", r.calendar_bytes_at_peak},
          {"peak_pending", r.peak_pending},
          {"bytes_per_pending", per_pending},
          {"peak_rss_bytes", r.peak_rss_bytes},
          {"harness_bytes", r.harness_bytes}};
}

Json accounting_json(const Report& r) {
  std::uint64_t before_bound = 0;
  for (const PolicyCounts& p : r.policies) before_bound += p.before_bound;
  return {{"scheduled", r.total_scheduled()},
          {"rearmed", r.periodic_runs},
          {"fired", r.fired},
          {"cancelled", r.total_cancelled()},
          {"returned_at_stop", r.returned},
          {"stop_returned", r.stop_returned},
          {"rejected", r.total_rejected()},
          {"probes", r.probes},
          {"double_fires", r.double_fires},
          {"overlapping_runs", r.overlapping_runs},
          {"fired_after_cancel", r.fired_after_cancel},
          {"stray_fires", r.stray_fires},
          {"early_fires", r.early_fires},
          {"fired_before_tick", r.fired_before_tick},
          {"cancel_true_not_pending", r.cancel_true_not_pending},
          {"moved_early", r.moved_early},
          {"refused_pending", r.refused_pending},
          {"off_shard", r.off_shard},
          {"probe_failures", r.probe_failures},
          {"unrecorded_fires", r.unrecorded_fires},
          {"pending_slots", r.pending_slots},
          {"returned_cancel_false", r.returned_cancel_false},
          {"pending_not_returned", r.pending_not_returned},
          {"stale_cancels", r.stale_cancels},
          {"stale_cancel_true", r.stale_cancel_true},
          {"callback_errors", r.engine.callback_errors},
          {"periodic_cancel_refused", r.periodic_cancel_refused},
          {"periodic_before_bound", before_bound},
          {"repeated_too_early", r.repeated.too_early},
          {"repeated_while_stopped", r.repeated.while_stopped},
          {"repeated_refused", r.repeated.refused}};
}

// The floor's sections: the control thread, cyclictest, the tick probes and every pass.
Json floor_sections_json(const Report& r) {
  const Json& s = r.sections;
  return {{"control",
           {{"ran", r.control_ran},
            {"mode", r.options.wait == WaitStrategy::spin ? "spin" : "sleep"},
            {"cpu", s.at("placement").at("control")},
            {"lateness_ns", histogram_json(r.control)},
            {"curve", curve_json(r.control)}}},
          {"cyclictest",
           {{"ran", r.cyclictest.ran},
            {"command", r.cyclictest.command},
            {"reason", r.cyclictest.reason},
            {"overflows", r.cyclictest.overflows},
            {"latency_ns", histogram_json(r.cyclictest.latency)},
            {"curve", curve_json(r.cyclictest.latency)}}},
          {"tick_lag", s.at("tick_lag")},
          {"passes", s.at("passes")},
          {"floor", floor_json(r)}};
}

}  // namespace

std::string report_json(const Report& r) {
  const Json& s = r.sections;
  Json j = {{"tool", "tickwheel-stress"},    {"ok", r.ok()},
            {"failures", r.failures},        {"config", s.at("config")},
            {"options", s.at("options")},    {"platform", s.at("platform")},
            {"placement", s.at("placement")}};
  j.update(floor_sections_json(r));
  j["environment"] = s.at("environment");
  j["run"] = {{"seconds", r.run_s}, {"stop_seconds", r.stop_s}};
  j["schedule"] = schedule_json(r);
  j.update(cancel_and_reschedule_json(r));
  j["fire"] = fire_json(r);
  j["periodic"] = periodic_json(r);
  j["repeated"] = repeated_json(r.repeated);
  j["engine"] = engine_json(r);
  j["shards"] = shards_json(r);
  j["executor"] = {{"kind", name_of(r.options.executor)},
                   {"pool_threads", pool_threads(r)},
                   {"max_executing", r.max_executing},
                   {"threads", s.at("executor_threads")}};
  j["memory"] = memory_json(r);
  j["machine"] = {{"voluntary_switches", r.voluntary_switches},
                  {"involuntary_switches", r.involuntary_switches},
                  {"loadavg_start", s.at("platform").at("loadavg_start")},
                  {"loadavg_end", s.at("platform").at("loadavg_end")}};
  j["series"] = s.at("series");
  j["accounting"] = accounting_json(r);
  j["notices"] = r.notices;
  return j.dump(2) + "\n";
}

}  // namespace tickwheel::stress
