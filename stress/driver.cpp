// stress/driver.cpp — the run's set-up, sampling, stop and end-of-run checks.
#include "driver.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "control.hpp"
#include "cyclictest.hpp"
#include "format.hpp"
#include "hlog.hpp"
#include "passes.hpp"
#include "placement.hpp"
#include "platform.hpp"
#include "poller.hpp"
#include "producer.hpp"
#include "repeated.hpp"
#include "workload.hpp"

namespace tickwheel::stress {
namespace {

// A load average above this per CPU before the run means other processes are competing for the CPUs.
constexpr double kBusyLoadPerCpu = 0.25;
// More involuntary context switches than this on a measured thread are worth a warning (a stray
// one is not: the figures show it).
constexpr std::uint64_t kPreemptionsWorthAWarning = 10;
// How long the driver waits for every shard's tick probe to run once before the run starts: a
// probe runs within a tick or two, and the rest is room for a machine that stalls the worker.
constexpr std::int64_t kProbeWaitNs = 30 * kSecond;

// Resident set size now, from /proc/self/statm (pages), or 0 if it cannot be read.
std::uint64_t current_rss() {
  unsigned long long size = 0;
  unsigned long long resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

rusage read_rusage() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage;
}

// "1.23M", "456.7k", "89"
std::string si(double v) {
  if (v >= 1e6) return format("%.2fM", v / 1e6);
  return v >= 1e4 ? format("%.1fk", v / 1e3) : format("%.0f", v);
}

// Where the harness placed a thread: a CPU list, or "any".
std::string cpus_or_any(const std::vector<unsigned>& cpus) {
  return cpus.empty() ? std::string("any") : format_cpu_list(cpus);
}

// The previous sample's totals, for the rates.
struct Totals {
  double t_s = 0;
  std::uint64_t scheduled = 0, cancelled = 0, fired = 0;
};

// Whole-run histograms as a sample saw them; the next sample's interval is the difference.
struct Snapshots {
  std::unique_ptr<Histogram> lateness = std::make_unique<Histogram>();
  std::unique_ptr<Histogram> past_tick = std::make_unique<Histogram>();
  std::unique_ptr<Histogram> control = std::make_unique<Histogram>();
  std::unique_ptr<Histogram> probe = std::make_unique<Histogram>();
};

class Driver {
 public:
  Driver(const Options& options, std::ostream& status, bool in_place)
      : o_(options), status_(status), in_place_(in_place) {}
  Report run();

 private:
  void build(Engine& engine);
  void start_probes(Engine& engine, const Pollers* pollers);
  void start_threads();
  void read_threads_and_interrupts(const Pollers* pollers);
  void warn_about_the_run();
  void describe_machine(const Pollers* pollers);
  void note(std::string line) {
    std::lock_guard lock(notices_mutex_);
    notices_.push_back(std::move(line));
  }
  Json sample(std::int64_t now, Engine& engine);
  void print_status(const Json& s);
  void plan();
  EngineOptions engine_options();
  void start_floor();
  void sample_until_end(Engine& engine);
  void stop_load();
  void collect(Engine& engine);
  void collect_calls();
  void add_moved_fires(const MoveCounters& m);
  void collect_recorders();
  void collect_probes_and_passes();
  void collect_periodic();
  void check_slots();

  const Options& o_;
  std::ostream& status_;
  const bool in_place_;
  Report r_;

  std::mutex notices_mutex_;
  std::vector<std::string> notices_;  // the engine's log lines (workers may write them)

  Placement placement_;
  std::vector<pid_t> worker_tids_;  // shard order; empty when unknown (a pool runs the probes)
  std::unique_ptr<ControlThread> control_;
  std::unique_ptr<Cyclictest> cyclictest_;  // beside the control thread
  Interrupts irq_before_;
  std::unique_ptr<HlogWriter> hlog_;
  Platform platform_;
  double loadavg_start_ = -1;
  Json threads_ = Json::array();     // every thread of the run, with its context switches
  Json interrupts_ = Json::array();  // the interrupts of each CPU a measured thread ran on

  SlotRange periodic_;  // the producers' periodic timers
  SlotRange probes_;    // the shards' tick probes, right after them
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<Recorders> recorders_;
  // Every pass of every shard: the engine's on_pass hook writes it (its context), so it is built
  // before the engine and outlives it.
  PassRecorders passes_;
  RunShared shared_;
  std::vector<std::unique_ptr<Producer>> producers_;
  std::vector<std::unique_ptr<Canceller>> cancellers_;
  std::vector<std::thread> producer_threads_;
  std::vector<std::thread> canceller_threads_;
  std::unique_ptr<RepeatedLoad> repeated_;

  std::int64_t start_ns_ = 0;
  double start_epoch_s_ = 0;      // the producers' start, seconds since the Unix epoch
  std::int64_t stop_end_ns_ = 0;  // Engine::stop() returned: no pass comes after it
  Totals previous_;
  Snapshots seen_;
  Json series_ = Json::array();
};

void Driver::build(Engine& engine) {
  const std::size_t shards = engine.shard_count();
  const unsigned producers = o_.producers != 0 ? o_.producers : static_cast<unsigned>(shards);
  r_.shards = shards;
  Options resolved = o_;
  resolved.shards = shards;
  resolved.producers = producers;
  r_.sections["config"] = describe(resolved);
  r_.sections["environment"] = {{"clock_read_ns", r_.clock_read_ns},
                                {"clock_monotonic_offset_ns", Clock::monotonic_offset_ns()},
                                {"hardware_threads", std::thread::hardware_concurrency()},
                                {"shards", shards},
                                {"producers", producers},
                                {"cancellers", o_.cancellers}};

  const auto timers = static_cast<std::uint32_t>(o_.timers);
  const auto burst = static_cast<std::uint32_t>(o_.burst);
  const auto periodic = static_cast<std::uint32_t>(o_.periodic);
  const SlotRange oneshots{0, timers};
  const SlotRange bursts{timers, timers + burst};
  periodic_ = SlotRange{bursts.end, bursts.end + periodic};
  probes_ = SlotRange{periodic_.end, periodic_.end + static_cast<std::uint32_t>(shards)};

  // make_unique value-initialises: every slot is written here, so its pages are resident before
  // the RSS baseline.
  slots_ = std::make_unique<Slot[]>(probes_.end);
  // Callbacks run on the workers, or on the pool's threads (and, should the pool's queue fail to
  // grow, on a worker): one recorder for each thread that may run one.
  const std::size_t callback_threads =
      shards + (o_.executor == ExecutorKind::pool ? o_.pool_threads : std::size_t{0});
  recorders_ = std::make_unique<Recorders>(slots_.get(), SlotRange{periodic_.begin, probes_.end}, probes_,
                                           callback_threads, o_);

  shared_.options = &o_;
  shared_.engine = &engine;
  shared_.slots = slots_.get();
  shared_.periodic = periodic_;
  shared_.recorders = recorders_.get();
  shared_.rate_per_producer = o_.schedule_rate / producers;
  for (unsigned i = 0; i < o_.cancellers; ++i) {
    cancellers_.push_back(std::make_unique<Canceller>(shared_));
    shared_.cancellers.push_back(cancellers_.back().get());
  }
  // Producer p owns the p-th share of the one-shot and periodic ranges; the first owns the bursts.
  auto share = [producers](SlotRange range, unsigned p) {
    const std::uint64_t n = range.size();
    return SlotRange{range.begin + static_cast<std::uint32_t>(n * p / producers),
                     range.begin + static_cast<std::uint32_t>(n * (p + 1) / producers)};
  };
  for (unsigned p = 0; p < producers; ++p) {
    producers_.push_back(std::make_unique<Producer>(shared_, p, share(oneshots, p), share(periodic_, p),
                                                    p == 0 ? bursts : SlotRange{bursts.end, bursts.end}));
  }
  r_.harness_bytes = std::uint64_t{probes_.end} * sizeof(Slot) +
                     std::uint64_t{periodic + shards} * sizeof(PeriodicTrack) +
                     callback_threads * sizeof(Recorder) + shards * sizeof(ProbeState) + passes_.bytes() +
                     std::uint64_t{timers} * sizeof(std::uint32_t) + producers * sizeof(Producer);
  for (const auto& p : producers_) r_.harness_bytes += p->agenda_base_bytes();
}

// One periodic timer per shard at a period of one tick, armed from this thread as a producer arms
// its periodic timers (the first run on a tick boundary the call cannot miss, see
// Producer::start_periodic()), then a wait until each has run once: the thread that ran it is the
// shard's worker (inline executor), whose id the priority and the report need.
void Driver::start_probes(Engine& engine, const Pollers* pollers) {
  const std::int64_t tick = o_.tick_ns;
  PeriodicOptions every;
  every.misfire = Misfire::fire_once_now;  // a stall is one late run (docs/stress.md)
  for (std::uint32_t s = probes_.begin; s < probes_.end; ++s) {
    const std::size_t shard = s - probes_.begin;
    const std::uint32_t seq = begin_instance(slots_[s]);
    const std::int64_t before = Clock::now();
    const std::int64_t due = (before + 2 * tick - 1) / tick * tick + tick;
    recorders_->set_first_run(s, due);
    every.initial_delay = Nanos(due - before - (tick - 1));
    slots_[s].timer =
        engine.schedule_every_on(shard, Nanos(tick), FirePeriodic{recorders_.get(), s, seq}, every);
    if (!slots_[s].timer) {
      throw std::runtime_error("the tick probe of shard " + std::to_string(shard) +
                               " could not be scheduled (" +
                               std::string(to_string(slots_[s].timer.status())) + ")");
    }
    ++r_.tick_probes;
  }
  r_.scheduled += r_.tick_probes;
  const std::int64_t give_up = Clock::now() + kProbeWaitNs + 2 * tick;
  for (const ProbeState& p : recorders_->probes()) {
    while (p.tid.load(std::memory_order_acquire) == 0) {
      if (Clock::now() > give_up) throw std::runtime_error("a shard's tick probe did not run within 30 s");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  if (pollers != nullptr) {
    worker_tids_ = pollers->tids();
  } else if (o_.executor == ExecutorKind::inline_) {
    for (const ProbeState& p : recorders_->probes())
      worker_tids_.push_back(p.tid.load(std::memory_order_acquire));
  }
  if (o_.rt_priority > 0) {
    for (std::size_t i = 0; i < worker_tids_.size(); ++i) {
      set_fifo(worker_tids_[i], o_.rt_priority,
               (pollers != nullptr ? "polling thread " : "worker ") + std::to_string(i));
    }
  }
}

void Driver::start_threads() {
  for (auto& p : producers_) producer_threads_.emplace_back([&p] { p->run(); });
  for (std::thread& t : producer_threads_) {
    if (std::string why = bind_thread(t.native_handle(), placement_.load); !why.empty()) {
      note("producers not bound to their CPUs: " + why);
    }
  }
  // Every producer takes its home shard before any other thread uses the engine (docs/stress.md).
  while (shared_.probed.load(std::memory_order_acquire) != producers_.size()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  std::string errors;
  for (auto& p : producers_) {
    if (!p->setup_error().empty()) errors += (errors.empty() ? "" : "; ") + p->setup_error();
  }
  if (!errors.empty()) {
    shared_.stop.store(true, std::memory_order_relaxed);
    shared_.go.store(true, std::memory_order_release);
    for (auto& t : producer_threads_) t.join();
    throw std::runtime_error(errors);
  }
  for (auto& c : cancellers_) canceller_threads_.emplace_back([&c] { c->run(); });
  for (std::thread& t : canceller_threads_) {
    if (std::string why = bind_thread(t.native_handle(), placement_.load); !why.empty()) {
      note("cancellers not bound to their CPUs: " + why);
    }
  }
  if (repeated_) {
    if (std::string why = repeated_->start(placement_.load); !why.empty()) {
      note("the repeated timers' control thread not bound to its CPUs: " + why);
    }
  }
  start_ns_ = Clock::now();
  start_epoch_s_ = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  shared_.start_ns = start_ns_;
  // Release: a producer that sees go also sees start_ns.
  shared_.go.store(true, std::memory_order_release);
}

Json Driver::sample(std::int64_t now, Engine& engine) {
  Totals t{static_cast<double>(now - start_ns_) / 1e9};
  for (const auto& p : producers_) {
    t.scheduled += p->scheduled.get();
    t.cancelled += p->cancels.cancelled.get();
  }
  for (const auto& c : cancellers_) t.cancelled += c->cancels.cancelled.get();
  Snapshots h;
  for (const Recorder& rec : recorders_->claimed()) {
    t.fired += rec.fired.get();
    rec.oneshot_lateness.add_to(*h.lateness);
    rec.periodic_lateness.add_to(*h.lateness);
    rec.past_tick.add_to(*h.past_tick);
  }
  // The floor beside it: the control thread's and the tick probes' lateness of the same second.
  if (control_) control_->lateness().add_to(*h.control);
  for (const ProbeState& p : recorders_->probes()) p.lag.add_to(*h.probe);
  const Histogram interval = Histogram::since(*h.lateness, *seen_.lateness);
  const Histogram control = Histogram::since(*h.control, *seen_.control);
  const Histogram probe = Histogram::since(*h.probe, *seen_.probe);
  const double dt = t.t_s - previous_.t_s;
  if (hlog_) {
    hlog_->interval("", previous_.t_s, dt, interval);
    hlog_->interval("past_tick", previous_.t_s, dt, Histogram::since(*h.past_tick, *seen_.past_tick));
    if (control_) hlog_->interval("control", previous_.t_s, dt, control);
    hlog_->interval("tick_probe", previous_.t_s, dt, probe);
  }
  const EngineStats es = engine.stats();
  r_.max_executing = std::max(r_.max_executing, es.executing);
  const std::uint64_t rss = current_rss();
  if (es.pending + es.queue_depth > r_.peak_pending) {
    r_.peak_pending = es.pending + es.queue_depth;
    r_.rss_at_peak_bytes = rss;
    r_.calendar_bytes_at_peak = 0;
    for (const auto& p : producers_) r_.calendar_bytes_at_peak += p->agenda_bytes.get();
  }
  const auto rate = [dt](std::uint64_t n, std::uint64_t before) {
    return dt > 0 ? static_cast<double>(n - before) / dt : 0.0;
  };
  Json s = {{"t_s", t.t_s},
            {"scheduled_per_s", rate(t.scheduled, previous_.scheduled)},
            {"cancelled_per_s", rate(t.cancelled, previous_.cancelled)},
            {"fired_per_s", rate(t.fired, previous_.fired)},
            {"pending", es.pending},
            {"queued", es.queue_depth},
            {"lateness_p99_ns", interval.percentile(99)},
            {"lateness_max_ns", interval.max()},
            {"lateness_p99_so_far_ns", h.lateness->percentile(99)},
            {"rss_bytes", rss},
            {"transfer_cap_hits", es.transfer_cap_hits},
            {"executing", es.executing},
            {"control_p99_ns", control.percentile(99)},
            {"probe_p99_ns", probe.percentile(99)}};
  previous_ = t;
  seen_ = std::move(h);
  return s;
}

void Driver::print_status(const Json& s) {
  if (o_.quiet) return;
  const auto us = [](std::uint64_t ns) { return format("%.1fus", static_cast<double>(ns) / 1e3); };
  std::string line =
      format("[%5.1f/%s] sched %s/s  cancel %s/s  fire %s/s  pending %s  lateness p99 %s (so far %s)",
             s["t_s"].get<double>(), format_duration(o_.duration_ns).c_str(),
             si(s["scheduled_per_s"]).c_str(), si(s["cancelled_per_s"]).c_str(), si(s["fired_per_s"]).c_str(),
             si(s["pending"].get<double>() + s["queued"].get<double>()).c_str(),
             us(s["lateness_p99_ns"]).c_str(), us(s["lateness_p99_so_far_ns"]).c_str());
  if (o_.executor == ExecutorKind::pool) line += "  executing " + si(s["executing"]);
  // On a terminal the line is rewritten in place (\r, then erase to the end of the line);
  // elsewhere (a log, a pipe) each second is its own line.
  status_ << (in_place_ ? "\r" : "") << line << (in_place_ ? "\x1b[K" : "\n") << std::flush;
}

// The producers' and cancellers' calls.
void add_times(CallTotals& to, const CallTimes& t) {
  to.calls += t.calls.get();
  to.batches += t.batches.get();
  to.ns += t.ns.get();
}

void Driver::collect_calls() {
  for (const auto& p : producers_) {
    add_times(r_.schedule, p->schedules);
    r_.scheduled += p->scheduled.get();
    r_.periodic_started += p->periodic_started;
    r_.periodic_inexact += p->periodic_inexact;
    for (std::size_t k = 0; k < kStatusCount; ++k) r_.rejected[k] += p->rejected_by[k];
    r_.probes += p->probes;
    r_.probe_failures += p->probe_failures;
    r_.off_shard += p->off_shard;
    r_.bursts += p->bursts.get();
    r_.burst_calls += p->burst_calls.get();
    r_.burst_ns += p->burst_ns.get();
    r_.max_burst_ns = std::max(r_.max_burst_ns, p->max_burst_ns.get());
    const MoveCounters& m = p->moves;
    add_times(r_.reschedule, m.times);
    r_.rescheduled += m.moved.get();
    r_.reschedule_refused += m.refused.get();
    add_moved_fires(m);
  }
  auto add_cancels = [this](const CancelCounters& c) {
    add_times(r_.cancel, c.times);
    r_.cancelled += c.cancelled.get();
    r_.cancel_lost += c.lost.get();
    r_.cancel_true_not_pending += c.true_not_pending;
    r_.periodic_cancelled += c.periodic.get();
    r_.periodic_cancel_refused += c.periodic_refused;
  };
  for (const auto& p : producers_) add_cancels(p->cancels);
  for (const auto& c : cancellers_) {
    add_cancels(c->cancels);
    r_.cancels_by_cancellers += c->cancels.times.calls.get();
  }
}

// The fires of moved timers that `m` judged, and its reschedules refused while pending.
void Driver::add_moved_fires(const MoveCounters& m) {
  r_.moved_fires += m.fires;
  r_.moved_raced += m.raced;
  r_.moved_early += m.early;
  r_.refused_pending += m.refused_pending;
}

// What the threads that ran callbacks recorded, thread by thread.
void Driver::collect_recorders() {
  r_.min_lateness_ns = std::numeric_limits<std::int64_t>::max();
  Json threads = Json::array();
  for (const Recorder& rec : recorders_->claimed()) {
    // With the inline executor, the shard whose worker this is: the shard of the first timer it
    // ran (every timer is on its producer's home shard, which the off-shard rule checks). -1 with
    // a pool, whose threads run every shard's timers.
    std::int64_t shard = -1;
    if (o_.executor == ExecutorKind::inline_) {
      for (const auto& p : producers_) {
        if (p->owns(rec.first_slot)) shard = static_cast<std::int64_t>(p->home());
      }
      if (probes_.contains(rec.first_slot)) shard = rec.first_slot - probes_.begin;
    }
    auto lateness = std::make_unique<Histogram>();
    rec.oneshot_lateness.add_to(*lateness);
    rec.periodic_lateness.add_to(*lateness);
    threads.push_back({{"shard", shard},
                       {"fired", rec.fired.get()},
                       {"periodic_runs", rec.periodic_runs.get()},
                       {"lateness_ns", histogram_json(*lateness)}});
    rec.oneshot_lateness.add_to(r_.oneshot_lateness);
    rec.periodic_lateness.add_to(r_.periodic_lateness);
    rec.past_tick.add_to(r_.lateness_past_tick);
    r_.fired += rec.fired.get();
    r_.periodic_runs += rec.periodic_runs.get();
    r_.double_fires += rec.double_fires;
    r_.overlapping_runs += rec.overlapping_runs;
    r_.fired_after_cancel += rec.fired_after_cancel;
    r_.stray_fires += rec.stray_fires;
    r_.early_fires += rec.early_fires;
    r_.fired_before_tick += rec.fired_before_tick;
    r_.min_lateness_ns = std::min(r_.min_lateness_ns, rec.min_lateness_ns);
    for (std::size_t k = 0; k < kPeriodicKinds; ++k) r_.policies[k].add(rec.policy[k]);
    r_.forced_skips += rec.forced_skips;
    r_.runs_after_cancel += rec.runs_after_cancel;
  }
  r_.sections["executor_threads"] = std::move(threads);
  r_.unrecorded_fires = recorders_->unrecorded();
}

// Each shard's tick probe and passes (passes.hpp), and the tick lag of all shards together.
void Driver::collect_probes_and_passes() {
  Json probes = Json::array();
  for (const ProbeState& p : recorders_->probes()) {
    auto lag = std::make_unique<Histogram>();
    p.lag.add_to(*lag);
    probes.push_back({{"index", probes.size()},
                      {"lag_ns", histogram_json(*lag)},
                      {"fires_per_tick", histogram_json(p.fires_per_tick)},
                      {"curve", curve_json(*lag)}});
    r_.probe_lag.merge(*lag);
  }
  r_.sections["tick_lag"] = {{"probes", r_.tick_probes},
                             {"lag_ns", histogram_json(r_.probe_lag)},
                             {"curve", curve_json(r_.probe_lag)},
                             {"shards", std::move(probes)}};
  Json shards = Json::array();
  auto all = std::make_unique<Histogram>();
  std::uint64_t count = 0;
  for (const PassRecorder& p : passes_.shards()) {
    auto lag = std::make_unique<Histogram>();
    p.tick_lag.add_to(*lag);
    all->merge(*lag);
    count += p.duration.count();
    shards.push_back({{"index", shards.size()},
                      {"count", p.duration.count()},
                      {"per_second", r_.run_s > 0 ? static_cast<double>(p.duration.count()) / r_.run_s : 0.0},
                      {"early", p.early.get()},
                      {"unplanned", p.unplanned.get()},
                      {"tick_lag_ns", histogram_json(*lag)},
                      {"duration_ns", histogram_json(p.duration)},
                      {"fired", histogram_json(p.fired)},
                      {"moved", histogram_json(p.moved)},
                      {"transferred", histogram_json(p.transferred)},
                      {"cancels", histogram_json(p.cancels)},
                      {"totals",
                       {{"fired", p.fired.sum()},
                        {"moved", p.moved.sum()},
                        {"transferred", p.transferred.sum()},
                        {"cancels", p.cancels.sum()}}},
                      {"curve", curve_json(*lag)}});
  }
  r_.sections["passes"] = {{"count", count},
                           {"tick_lag_ns", histogram_json(*all)},
                           {"curve", curve_json(*all)},
                           {"shards", shards}};
}

void Driver::collect(Engine& engine) {
  collect_calls();
  r_.engine = engine.stats();
  collect_recorders();
  collect_probes_and_passes();
  if (control_) control_->lateness().add_to(r_.control);
  r_.lateness.merge(r_.oneshot_lateness);
  r_.lateness.merge(r_.periodic_lateness);
  if (r_.fired == 0) r_.min_lateness_ns = 0;
}

// After stop(), whose visitor cancelled every timer it handed back.
// Each periodic timer's kind, and the most skips the skip timers' grids allow: a skip or a run takes
// one grid point each, and no pass comes after stop() returned (an inexact grid starts later than
// first_due, so counting from first_due only raises the bound).
void Driver::collect_periodic() {
  for (std::uint32_t s = periodic_.begin; s < periodic_.end; ++s) {
    const std::uint32_t word = slots_[s].state.load(std::memory_order_relaxed);
    if (state_of(word) == SlotState::idle) continue;  // its schedule was refused
    const PeriodicPolicy kind = recorders_->kind_of(s);
    ++r_.policies[static_cast<std::size_t>(kind)].timers;
    const PeriodicTrack& k = recorders_->track(s);
    if (kind != PeriodicPolicy::skip || stop_end_ns_ < k.first_due) continue;
    const auto points = static_cast<std::uint64_t>((stop_end_ns_ - k.first_due) / o_.period_ns) + 1;
    r_.skip_bound += points > k.runs ? points - k.runs : 0;
  }
}

void Driver::check_slots() {
  for (std::uint32_t s = 0; s < probes_.end; ++s) {
    if (state_of(slots_[s].state.load(std::memory_order_relaxed)) == SlotState::pending) ++r_.pending_slots;
  }
  // The fires of moved one-shots that their producer did not see before it stopped (every thread
  // that writes a slot has been joined, and stop() waited for every callback).
  MoveCounters late;
  for (std::uint32_t s = 0; s < periodic_.begin; ++s) {
    if (state_of(slots_[s].state.load(std::memory_order_acquire)) == SlotState::fired) {
      settle_moved_fire(slots_[s], o_.tick_ns, late);
    }
  }
  add_moved_fires(late);
  for (std::uint32_t s = 0; s < probes_.end; ++s) {
    Slot& slot = slots_[s];
    Timer& handle = slot.timer;
    switch (state_of(slot.state.load(std::memory_order_relaxed))) {
      case SlotState::pending:
        // Cancelled by stop()'s visitor iff stop() returned it: no node was reused since (nothing
        // has been scheduled since stop()), so cancelled() is exact.
        if (!handle.cancelled()) ++r_.pending_not_returned;
        break;
      case SlotState::idle:
        // The last arm failed: the handle, if any, is the instance before, which fired or was
        // cancelled; a second cancel must refuse it like any stale one.
        if (!handle) break;
        [[fallthrough]];
      case SlotState::fired:
      case SlotState::cancelled:
      case SlotState::cancelled_in_run:
      case SlotState::ran_after_cancel:
        ++r_.stale_cancels;
        if (handle.cancel()) ++r_.stale_cancel_true;
        break;
    }
  }
}

// Where the threads go, planned before the engine exists (its workers take their CPUs from it).
void Driver::plan() {
  const Platform machine = read_platform({});
  const std::size_t planned_shards =
      o_.shards != 0 ? o_.shards : std::max<std::size_t>(1, core_count(machine.allowed));
  placement_ = plan_placement(
      o_, planned_shards, o_.producers != 0 ? o_.producers : static_cast<unsigned>(planned_shards), machine);
  std::vector<unsigned> of_interest = placement_.workers;
  if (placement_.control >= 0) of_interest.push_back(static_cast<unsigned>(placement_.control));
  std::sort(of_interest.begin(), of_interest.end());
  of_interest.erase(std::unique(of_interest.begin(), of_interest.end()), of_interest.end());
  platform_ = read_platform(of_interest);
}

EngineOptions Driver::engine_options() {
  EngineOptions eo;
  eo.shards = o_.shards;
  eo.tick = std::chrono::nanoseconds(o_.tick_ns);
  eo.transfer_cap = o_.transfer_cap;
  eo.max_pending_per_shard = o_.max_pending;
  eo.wait = o_.wait;
  eo.threads = o_.threads;
  eo.pin_workers = o_.pin && o_.threads == Threads::workers;
  if (o_.threads == Threads::workers) eo.cpus = placement_.workers;
  eo.log = [this](std::string_view line) { note(std::string(line)); };
  eo.on_pass = &PassRecorders::on_pass;
  eo.on_pass_context = &passes_;
  if (o_.executor == ExecutorKind::pool) {
    ThreadPoolOptions pool;
    pool.threads = o_.pool_threads;
    pool.log = eo.log;
    eo.executor = std::make_shared<ThreadPoolExecutor>(std::move(pool));
  }
  return eo;
}

// The platform's floor beside the engine: the control thread, and cyclictest beside it. Not
// beside a spinning control thread: cyclictest measures a sleeping thread's wake-ups, and on the
// spinner's CPU it would take that CPU from it, and from the load, and measure neither.
void Driver::start_floor() {
  if (!o_.control) {
    r_.cyclictest.reason = "no control thread (--no-control) to run it beside";
    return;
  }
  const bool spin = o_.wait == WaitStrategy::spin;
  control_ = std::make_unique<ControlThread>(o_.tick_ns, spin, placement_.control, o_.rt_priority);
  control_->start();
  r_.control_ran = true;
  if (spin) {
    r_.cyclictest.reason =
        "the control thread spins (--wait spin); cyclictest measures a sleeping thread's wake-ups";
    return;
  }
  cyclictest_ = std::make_unique<Cyclictest>(o_.tick_ns, placement_.control, o_.rt_priority, o_.mlock);
  cyclictest_->start();
}

// One sample per second until the run's end.
void Driver::sample_until_end(Engine& engine) {
  const std::int64_t end = start_ns_ + o_.duration_ns;
  for (std::int64_t next = start_ns_ + kSecond;; next += kSecond) {
    Clock::sleep_until(std::min(next, end));
    const std::int64_t now = Clock::now();
    series_.push_back(sample(now, engine));
    print_status(series_.back());
    if (now >= end) break;
  }
}

// Stops the load: producers, cancellers, the repeated timers and the floor's threads.
void Driver::stop_load() {
  shared_.stop.store(true, std::memory_order_relaxed);
  for (auto& t : producer_threads_) t.join();
  for (auto& c : cancellers_) c->finish();
  for (auto& t : canceller_threads_) t.join();
  if (repeated_) r_.repeated = repeated_->finish();
  if (control_) control_->stop();
  if (cyclictest_) r_.cyclictest = cyclictest_->stop();
}

Report Driver::run() {
  r_.options = o_;
  r_.sections["options"] = o_.as_json;
  r_.clock_read_ns = Clock::measure_read_cost();
  if (o_.mlock) lock_memory();

  plan();

  Engine engine(engine_options());
  // Sized before any pass: the constructor starts no thread, and the workers (or polling threads)
  // start below.
  passes_.resize(engine.shard_count());
  // Declared after the engine: destroyed (joined) before it, since its stop() waits for a poll.
  std::unique_ptr<Pollers> pollers;
  if (o_.threads == Threads::manual) {
    pollers = std::make_unique<Pollers>(engine, o_, placement_.workers);
  } else {
    engine.start();
  }
  build(engine);
  if (o_.repeated != 0) {
    repeated_ = std::make_unique<RepeatedLoad>(o_, placement_.load,
                                               [this](std::string_view line) { note(std::string(line)); });
  }
  start_probes(engine, pollers.get());
  start_floor();

  irq_before_ = read_interrupts();
  loadavg_start_ = read_loadavg();
  const rusage usage_start = read_rusage();
  r_.rss_base_bytes = current_rss();
  start_threads();
  if (!o_.hlog_path.empty()) hlog_ = std::make_unique<HlogWriter>(start_epoch_s_);

  sample_until_end(engine);
  if (!o_.quiet && in_place_) status_ << '\n' << std::flush;
  describe_machine(pollers.get());

  stop_load();
  const std::int64_t stop_at = Clock::now();
  r_.run_s = static_cast<double>(stop_at - start_ns_) / 1e9;
  if (pollers) pollers->stop();
  // Every thread that cancels has been joined, so no cancel() races stop(): every timer it hands
  // back is still pending, and the visitor's cancel() must win (Engine::stop's rule for a cancel
  // racing it, in tickwheel/engine.hpp). The visitor allocates nothing (stop(visit)); the
  // stopping thread's cancels count in stats().cancelled, so the engine's accounting still closes
  // with nothing pending.
  r_.stop_returned = engine.stop([this](Timer timer) noexcept {
    ++r_.returned;
    if (!timer.cancel()) ++r_.returned_cancel_false;
  });
  stop_end_ns_ = Clock::now();
  r_.stop_s = static_cast<double>(stop_end_ns_ - stop_at) / 1e9;

  const rusage usage_end = read_rusage();
  r_.voluntary_switches = static_cast<std::uint64_t>(usage_end.ru_nvcsw - usage_start.ru_nvcsw);
  r_.involuntary_switches = static_cast<std::uint64_t>(usage_end.ru_nivcsw - usage_start.ru_nivcsw);
  r_.peak_rss_bytes = static_cast<std::uint64_t>(usage_end.ru_maxrss) * 1024;  // KiB on Linux

  collect(engine);
  collect_periodic();
  check_slots();
  if (hlog_) r_.hlog = hlog_->text();
  r_.sections["series"] = std::move(series_);
  {
    std::lock_guard lock(notices_mutex_);
    r_.notices = notices_;
  }
  check_accounting(r_);
  return std::move(r_);
}

// Before anything stops: the threads' context switches (their /proc entries go as they end) and
// the interrupts of the run, the warnings they call for, and the report's platform and placement.
void Driver::describe_machine(const Pollers* pollers) {
  read_threads_and_interrupts(pollers);
  warn_about_the_run();
  Json& platform = r_.sections["platform"] = std::move(platform_.report);
  platform["loadavg_start"] = loadavg_start_;
  platform["loadavg_end"] = read_loadavg();
  platform["interrupts"] = std::move(interrupts_);
  platform["threads"] = std::move(threads_);
  r_.sections["placement"] = {{"workers", cpus_or_any(placement_.workers)},
                              {"load", cpus_or_any(placement_.load)},
                              {"control", placement_.control},
                              {"fitted", o_.fitted},
                              {"warnings", placement_.warnings}};
}

// What the plan could not foresee, from what the run saw: other processes on the machine, and the
// measured threads' preemptions, which put a wait for the CPU into their lateness.
void Driver::warn_about_the_run() {
  std::vector<std::string>& w = placement_.warnings;
  const std::size_t cpus = std::max<std::size_t>(1, platform_.allowed.size());
  if (loadavg_start_ > kBusyLoadPerCpu * static_cast<double>(cpus)) {
    w.push_back(format(
        "the machine was busy before the run: load average %.2f on %zu CPUs over the last minute; other "
        "work competes with the run's threads for the CPUs",
        loadavg_start_, cpus));
  }
  for (const Json& t : threads_) {
    const std::string role = t["role"];
    const bool measured = role == "worker" || role == "poller" || role == "control";
    const std::uint64_t preempted = t["involuntary_switches"];
    if (measured && t["known"] && preempted > kPreemptionsWorthAWarning) {
      w.push_back(format(
          "%s %zu was preempted %llu times (involuntary context switches): each is a wait for its CPU, "
          "and part of its lateness tail",
          role.c_str(), t["index"].get<std::size_t>(), static_cast<unsigned long long>(preempted)));
    }
  }
}

void Driver::read_threads_and_interrupts(const Pollers* pollers) {
  const auto add = [this](const std::string& role, std::size_t index, pid_t tid, const std::string& cpus) {
    Json t = {{"role", role}, {"index", index}, {"tid", tid}, {"cpus", cpus}};
    t.update(read_thread_switches(tid));
    threads_.push_back(std::move(t));
  };
  for (std::size_t i = 0; i < worker_tids_.size(); ++i) {
    const std::vector<unsigned>& w = placement_.workers;
    add(pollers != nullptr ? "poller" : "worker", i, worker_tids_[i],
        w.empty() || !o_.pin ? std::string("any") : std::to_string(w[i % w.size()]));
  }
  for (std::size_t i = 0; i < producers_.size(); ++i) {
    add("producer", i, producers_[i]->tid.load(std::memory_order_relaxed), cpus_or_any(placement_.load));
  }
  for (std::size_t i = 0; i < cancellers_.size(); ++i) {
    add("canceller", i, cancellers_[i]->tid.load(std::memory_order_relaxed), cpus_or_any(placement_.load));
  }
  if (control_) {
    add("control", 0, control_->tid(),
        control_->cpu() >= 0 ? std::to_string(control_->cpu()) : std::string("any"));
  }
  if (repeated_) {
    add("repeater", 0, repeated_->control_tid(), cpus_or_any(placement_.load));
    if (const pid_t worker = repeated_->worker_tid(); worker != 0) {
      add("rt-worker", 0, worker,
          placement_.load.empty() ? std::string("any") : std::to_string(placement_.load.front()));
    }
  }
  // Threads that ran callbacks and are not workers: a pool's.
  std::size_t pool = 0;
  for (const Recorder& rec : recorders_->claimed()) {
    const pid_t tid = rec.tid.load(std::memory_order_relaxed);
    if (std::find(worker_tids_.begin(), worker_tids_.end(), tid) == worker_tids_.end())
      add("pool", pool++, tid, "any");
  }

  // The interrupts of each CPU a measured thread runs on.
  const Interrupts after = read_interrupts();
  std::map<unsigned, std::string> cpus;  // CPU -> the roles it runs, in CPU order
  const auto role_of = [&](unsigned cpu, const std::string& role) {
    std::string& roles = cpus[cpu];
    roles += (roles.empty() ? "" : ", ") + role;
  };
  for (std::size_t i = 0; i < placement_.workers.size() && i < std::max<std::size_t>(1, r_.shards); ++i) {
    role_of(placement_.workers[i], (pollers != nullptr ? "poller " : "worker ") + std::to_string(i));
  }
  if (control_ && control_->cpu() >= 0) role_of(static_cast<unsigned>(control_->cpu()), "control");
  for (const unsigned c : placement_.load) role_of(c, "load");
  if (cpus.empty()) {
    for (const unsigned c : platform_.allowed) role_of(c, "any");
  }
  for (const auto& [cpu, role] : cpus) {
    Json irq = interrupts_between(irq_before_, after, cpu);
    irq["role"] = role;
    interrupts_.push_back(std::move(irq));
  }
}

}  // namespace

Report run_stress(const Options& options, std::ostream& status, bool in_place) {
  auto driver = std::make_unique<Driver>(options, status, in_place);
  return driver->run();
}

}  // namespace tickwheel::stress
