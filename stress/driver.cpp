// stress/driver.cpp — the run's set-up, sampling, stop and end-of-run checks.
#include "driver.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

constexpr std::int64_t kSecond = 1'000'000'000;
// A load average above this per CPU before the run means other processes are competing for the CPUs.
constexpr double kBusyLoadPerCpu = 0.25;
// More involuntary context switches than this on a measured thread are worth a warning (a stray
// one is not: the figures show it).
constexpr std::uint64_t kPreemptionsWorthAWarning = 10;
// How long the driver waits for every shard's tick probe to run once before the run starts.
constexpr std::int64_t kProbeWaitNs = 5 * kSecond;

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
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (v >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

std::string us(std::uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fus", static_cast<double>(ns) / 1e3);
  return buf;
}

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
  void note(std::string line) {
    std::lock_guard lock(notices_mutex_);
    notices_.push_back(std::move(line));
  }
  Sample sample(std::int64_t now, Engine& engine);
  void print_status(const Sample& s);
  void plan();
  EngineOptions engine_options();
  void start_floor();
  void sample_until_end(Engine& engine);
  void stop_load();
  void collect(Engine& engine);
  void collect_calls();
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
  std::unique_ptr<Histogram> previous_past_tick_ = std::make_unique<Histogram>();
  std::unique_ptr<Histogram> previous_control_ = std::make_unique<Histogram>();
  std::unique_ptr<Histogram> previous_probe_ = std::make_unique<Histogram>();

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
  std::int64_t stop_end_ns_ = 0;  // Engine::stop() returned: no pass comes after it
  Sample previous_;
  std::unique_ptr<Histogram> previous_lateness_ = std::make_unique<Histogram>();
};

void Driver::build(Engine& engine) {
  const std::size_t shards = engine.shard_count();
  const unsigned producers = o_.producers != 0 ? o_.producers : static_cast<unsigned>(shards);
  r_.shards = shards;
  r_.producers = producers;
  r_.cancellers = o_.cancellers;
  Options resolved = o_;
  resolved.shards = shards;
  resolved.producers = producers;
  r_.config = describe(resolved);

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
  every.misfire = Misfire::fire_once_now;  // a stall is one late run (see workload.hpp)
  for (std::uint32_t s = probes_.begin; s < probes_.end; ++s) {
    const std::size_t shard = s - probes_.begin;
    const std::uint32_t seq = next_seq(seq_of(slots_[s].state.load(std::memory_order_relaxed)));
    // Relaxed: the schedule's hand-off publishes it to the callback.
    slots_[s].state.store(slot_word(seq, SlotState::pending), std::memory_order_relaxed);
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
      if (Clock::now() > give_up) throw std::runtime_error("a shard's tick probe did not run within 5 s");
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
  // Every producer takes its home shard before any other thread uses the engine (see producer.hpp).
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
  r_.start_epoch_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  shared_.start_ns = start_ns_;
  // Release: a producer that sees go also sees start_ns.
  shared_.go.store(true, std::memory_order_release);
}

Sample Driver::sample(std::int64_t now, Engine& engine) {
  Sample s;
  s.t_s = static_cast<double>(now - start_ns_) / 1e9;
  for (const auto& p : producers_) {
    s.scheduled += p->scheduled.get();
    s.cancelled += p->cancels.cancelled.get();
  }
  for (const auto& c : cancellers_) s.cancelled += c->cancels.cancelled.get();
  auto lateness = std::make_unique<Histogram>();
  for (const Recorder& rec : recorders_->claimed()) {
    s.fired += rec.fired.get();
    rec.oneshot_lateness.add_to(*lateness);
    rec.periodic_lateness.add_to(*lateness);
  }
  const EngineStats es = engine.stats();
  s.pending = es.pending;
  s.queued = es.queue_depth;
  s.transfer_cap_hits = es.transfer_cap_hits;
  s.executing = es.executing;
  r_.max_executing = std::max(r_.max_executing, es.executing);
  const double dt = s.t_s - previous_.t_s;
  if (dt > 0) {
    s.schedule_rate = static_cast<double>(s.scheduled - previous_.scheduled) / dt;
    s.cancel_rate = static_cast<double>(s.cancelled - previous_.cancelled) / dt;
    s.fire_rate = static_cast<double>(s.fired - previous_.fired) / dt;
  }
  const Histogram interval = Histogram::since(*lateness, *previous_lateness_);
  s.p99_ns = interval.percentile(99);
  s.max_ns = interval.max();
  s.p99_so_far_ns = lateness->percentile(99);
  s.rss_bytes = current_rss();

  // The floor beside it: the control thread's and the tick probes' lateness of the same second.
  auto past_tick = std::make_unique<Histogram>();
  for (const Recorder& rec : recorders_->claimed()) rec.past_tick.add_to(*past_tick);
  auto control = std::make_unique<Histogram>();
  if (control_) control_->lateness().add_to(*control);
  auto probe = std::make_unique<Histogram>();
  for (const ProbeState& p : recorders_->probes()) p.lag.add_to(*probe);
  const Histogram control_interval = Histogram::since(*control, *previous_control_);
  const Histogram probe_interval = Histogram::since(*probe, *previous_probe_);
  s.control_p99_ns = control_interval.percentile(99);
  s.probe_p99_ns = probe_interval.percentile(99);
  if (hlog_) {
    const double start = previous_.t_s;
    hlog_->interval("", start, dt, interval);
    hlog_->interval("past_tick", start, dt, Histogram::since(*past_tick, *previous_past_tick_));
    if (control_) hlog_->interval("control", start, dt, control_interval);
    hlog_->interval("tick_probe", start, dt, probe_interval);
  }
  previous_past_tick_ = std::move(past_tick);
  previous_control_ = std::move(control);
  previous_probe_ = std::move(probe);

  if (s.pending + s.queued > r_.peak_pending) {
    r_.peak_pending = s.pending + s.queued;
    r_.rss_at_peak_bytes = s.rss_bytes;
    r_.calendar_bytes_at_peak = 0;
    for (const auto& p : producers_) r_.calendar_bytes_at_peak += p->agenda_bytes.get();
  }
  previous_ = s;
  previous_lateness_ = std::move(lateness);
  return s;
}

void Driver::print_status(const Sample& s) {
  if (o_.quiet) return;
  char line[256];
  const int n = std::snprintf(
      line, sizeof line,
      "[%5.1f/%s] sched %s/s  cancel %s/s  fire %s/s  pending %s  lateness p99 %s (so far %s)", s.t_s,
      format_duration(o_.duration_ns).c_str(), si(s.schedule_rate).c_str(), si(s.cancel_rate).c_str(),
      si(s.fire_rate).c_str(), si(static_cast<double>(s.pending + s.queued)).c_str(), us(s.p99_ns).c_str(),
      us(s.p99_so_far_ns).c_str());
  if (o_.executor == ExecutorKind::pool && n > 0 && static_cast<std::size_t>(n) < sizeof line) {
    std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), "  executing %s",
                  si(static_cast<double>(s.executing)).c_str());
  }
  // On a terminal the line is rewritten in place (\r, then erase to the end of the line);
  // elsewhere (a log, a pipe) each second is its own line.
  status_ << (in_place_ ? "\r" : "") << line << (in_place_ ? "\x1b[K" : "\n") << std::flush;
}

// The producers' and cancellers' calls.
void Driver::collect_calls() {
  for (const auto& p : producers_) {
    r_.schedule_calls += p->schedules.calls.get();
    r_.scheduled += p->scheduled.get();
    r_.schedule_batches += p->schedules.batches.get();
    r_.schedule_ns += p->schedules.ns.get();
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
  }
  auto add_moves = [this](const MoveCounters& m) {
    r_.reschedule_calls += m.times.calls.get();
    r_.reschedule_batches += m.times.batches.get();
    r_.reschedule_ns += m.times.ns.get();
    r_.rescheduled += m.moved.get();
    r_.reschedule_refused += m.refused.get();
    r_.moved_fires += m.fires;
    r_.moved_raced += m.raced;
    r_.moved_early += m.early;
    r_.refused_pending += m.refused_pending;
  };
  auto add_cancels = [this](const CancelCounters& c) {
    r_.cancel_calls += c.times.calls.get();
    r_.cancel_batches += c.times.batches.get();
    r_.cancel_ns += c.times.ns.get();
    r_.cancelled += c.cancelled.get();
    r_.cancel_lost += c.lost.get();
    r_.cancel_true_not_pending += c.true_not_pending;
    r_.periodic_cancelled += c.periodic.get();
    r_.periodic_cancel_refused += c.periodic_refused;
  };
  for (const auto& p : producers_) add_cancels(p->cancels);
  for (const auto& p : producers_) add_moves(p->moves);
  for (const auto& c : cancellers_) {
    add_cancels(c->cancels);
    r_.cancels_by_cancellers += c->cancels.times.calls.get();
  }
}

// What the threads that ran callbacks recorded, thread by thread.
void Driver::collect_recorders() {
  r_.min_lateness_ns = std::numeric_limits<std::int64_t>::max();
  for (const Recorder& rec : recorders_->claimed()) {
    ThreadReport thread;
    if (o_.executor == ExecutorKind::inline_) {
      // Every timer is on its producer's home shard (the off-shard rule checks it), and with no
      // executor a worker runs only its own shard's timers.
      for (const auto& p : producers_) {
        if (p->owns(rec.first_slot)) thread.shard = static_cast<std::int64_t>(p->home());
      }
      if (probes_.contains(rec.first_slot)) thread.shard = rec.first_slot - probes_.begin;
    }
    thread.fired = rec.fired.get();
    thread.periodic_runs = rec.periodic_runs.get();
    rec.oneshot_lateness.add_to(thread.lateness);
    rec.periodic_lateness.add_to(thread.lateness);
    rec.oneshot_lateness.add_to(r_.oneshot_lateness);
    rec.periodic_lateness.add_to(r_.periodic_lateness);
    rec.past_tick.add_to(r_.lateness_past_tick);
    r_.fired += thread.fired;
    r_.periodic_runs += thread.periodic_runs;
    r_.double_fires += rec.double_fires;
    r_.overlapping_runs += rec.overlapping_runs;
    r_.fired_after_cancel += rec.fired_after_cancel;
    r_.stray_fires += rec.stray_fires;
    r_.early_fires += rec.early_fires;
    r_.fired_before_tick += rec.fired_before_tick;
    r_.min_lateness_ns = std::min(r_.min_lateness_ns, rec.min_lateness_ns);
    for (std::size_t k = 0; k < kPeriodicKinds; ++k) {
      r_.policies[k].runs += rec.policy[k].runs;
      r_.policies[k].before_bound += rec.policy[k].before_bound;
      r_.policies[k].forced += rec.policy[k].forced;
    }
    r_.forced_skips += rec.forced_skips;
    r_.runs_after_cancel += rec.runs_after_cancel;
    r_.callback_threads.push_back(std::move(thread));
  }
  r_.unrecorded_fires = recorders_->unrecorded();
}

// Each shard's tick probe and passes.
void Driver::collect_probes_and_passes() {
  for (const ProbeState& p : recorders_->probes()) {
    r_.shard_probes.emplace_back();
    p.lag.add_to(r_.shard_probes.back().lag);
    p.fires_per_tick.add_to(r_.shard_probes.back().fires_per_tick);
    r_.probe_lag.merge(r_.shard_probes.back().lag);
  }
  for (const PassRecorder& p : passes_.shards()) {
    ShardPasses& out = r_.shard_passes.emplace_back();
    out.passes = p.passes.get();
    out.early = p.early.get();
    out.unplanned = p.unplanned.get();
    p.tick_lag.add_to(out.tick_lag);
    p.duration.add_to(out.duration);
    p.fired.add_to(out.fired);
    p.moved.add_to(out.moved);
    p.transferred.add_to(out.transferred);
    p.cancels.add_to(out.cancels);
    out.fired_total = p.fired_total.get();
    out.moved_total = p.moved_total.get();
    out.transferred_total = p.transferred_total.get();
    out.cancels_total = p.cancels_total.get();
    r_.pass_lag.merge(out.tick_lag);
  }
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
  r_.moved_fires += late.fires;
  r_.moved_raced += late.raced;
  r_.moved_early += late.early;
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
  r_.platform = read_platform(of_interest);
  r_.placement = placement_;
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
    r_.series.push_back(sample(now, engine));
    print_status(r_.series.back());
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
  r_.fitted = o_.fitted;
  r_.clock_read_ns = Clock::measure_read_cost();
  r_.clock_monotonic_offset_ns = Clock::monotonic_offset_ns();
  r_.hardware_threads = std::thread::hardware_concurrency();
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
  r_.loadavg_start = read_loadavg();
  const rusage usage_start = read_rusage();
  r_.rss_base_bytes = current_rss();
  start_threads();
  if (!o_.hlog_path.empty()) hlog_ = std::make_unique<HlogWriter>(r_.start_epoch_s);

  sample_until_end(engine);
  if (!o_.quiet && in_place_) status_ << '\n' << std::flush;
  // Before anything stops: the threads' context switches (their /proc entries go as they end) and
  // the interrupts of the run.
  read_threads_and_interrupts(pollers.get());
  r_.loadavg_end = read_loadavg();
  warn_about_the_run();

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
  {
    std::lock_guard lock(notices_mutex_);
    r_.notices = notices_;
  }
  check_accounting(r_);
  return std::move(r_);
}

// What the plan could not foresee, from what the run saw: other processes on the machine, and the
// measured threads' preemptions, which put a wait for the CPU into their lateness.
void Driver::warn_about_the_run() {
  std::vector<std::string>& w = r_.placement.warnings;
  const std::size_t cpus = std::max<std::size_t>(1, r_.platform.allowed.size());
  if (r_.loadavg_start > kBusyLoadPerCpu * static_cast<double>(cpus)) {
    w.push_back(format(
        "the machine was busy before the run: load average %.2f on %zu CPUs over the last minute; other "
        "work competes with the run's threads for the CPUs",
        r_.loadavg_start, cpus));
  }
  for (const ThreadInfo& t : r_.threads) {
    const bool measured = t.role == "worker" || t.role == "poller" || t.role == "control";
    if (measured && t.switches.known && t.switches.involuntary > kPreemptionsWorthAWarning) {
      w.push_back(format(
          "%s %zu was preempted %llu times (involuntary context switches): each is a wait for its CPU, "
          "and part of its lateness tail",
          t.role.c_str(), t.index, static_cast<unsigned long long>(t.switches.involuntary)));
    }
  }
}

void Driver::read_threads_and_interrupts(const Pollers* pollers) {
  const auto place = [](const std::vector<unsigned>& cpus) {
    return cpus.empty() ? std::string("any") : format_cpu_list(cpus);
  };
  const auto add = [this](std::string role, std::size_t index, pid_t tid, std::string cpus) {
    r_.threads.push_back(ThreadInfo{std::move(role), index, tid, std::move(cpus), read_thread_switches(tid)});
  };
  for (std::size_t i = 0; i < worker_tids_.size(); ++i) {
    const std::vector<unsigned>& w = placement_.workers;
    add(pollers != nullptr ? "poller" : "worker", i, worker_tids_[i],
        w.empty() || !o_.pin ? std::string("any") : std::to_string(w[i % w.size()]));
  }
  for (std::size_t i = 0; i < producers_.size(); ++i) {
    add("producer", i, producers_[i]->tid.load(std::memory_order_relaxed), place(placement_.load));
  }
  for (std::size_t i = 0; i < cancellers_.size(); ++i) {
    add("canceller", i, cancellers_[i]->tid.load(std::memory_order_relaxed), place(placement_.load));
  }
  if (control_) {
    add("control", 0, control_->tid(),
        control_->cpu() >= 0 ? std::to_string(control_->cpu()) : std::string("any"));
  }
  if (repeated_) {
    add("repeater", 0, repeated_->control_tid(), place(placement_.load));
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
  std::vector<std::pair<unsigned, std::string>> cpus;
  const auto role_of = [&](unsigned cpu, const std::string& role) {
    for (auto& [c, r] : cpus) {
      if (c == cpu) {
        r += ", " + role;
        return;
      }
    }
    cpus.emplace_back(cpu, role);
  };
  for (std::size_t i = 0; i < placement_.workers.size() && i < std::max<std::size_t>(1, r_.shards); ++i) {
    role_of(placement_.workers[i], (pollers != nullptr ? "poller " : "worker ") + std::to_string(i));
  }
  if (control_ && control_->cpu() >= 0) role_of(static_cast<unsigned>(control_->cpu()), "control");
  for (const unsigned c : placement_.load) role_of(c, "load");
  if (cpus.empty()) {
    for (const unsigned c : r_.platform.allowed) role_of(c, "any");
  }
  std::sort(cpus.begin(), cpus.end());
  for (const auto& [cpu, role] : cpus)
    r_.interrupts.push_back(CpuIrq{role, interrupts_between(irq_before_, after, cpu)});
}

}  // namespace

Report run_stress(const Options& options, std::ostream& status, bool in_place) {
  auto driver = std::make_unique<Driver>(options, status, in_place);
  return driver->run();
}

}  // namespace tickwheel::stress
