// stress/repeated.cpp — the repeated timers' engine, their control thread and the check of each run.
#include "repeated.hpp"

#include <chrono>
#include <string>
#include <utility>

#include "clock.hpp"
#include "placement.hpp"
#include "platform.hpp"

namespace tickwheel::stress {
namespace {

// Timeouts drawn for start-up and each reset: protocol timers of a few milliseconds, so that in a
// short run each timer runs, is reset before it runs, and is stopped and restarted many times.
constexpr std::int64_t kMinTimeoutNs = 1 * kMs;
constexpr std::int64_t kMaxTimeoutNs = 20 * kMs;
// The control thread's pause between two calls, uniform up to this.
constexpr std::int64_t kMaxGapNs = 8 * kMs;

enum class Call { start, stop, restart, reset };

}  // namespace

RepeatedLoad::RepeatedLoad(const Options& o, const std::vector<unsigned>& cpus,
                           std::function<void(std::string_view)> log)
    : o_(o), watches_(std::make_unique<Watch[]>(o.repeated)) {
  EngineOptions eo;
  eo.shards = 1;
  eo.tick = std::chrono::milliseconds(1);
  eo.wait = WaitStrategy::sleep;
  eo.pin_workers = !cpus.empty();
  eo.cpus = cpus;
  eo.log = std::move(log);
  engine_ = std::make_unique<Engine>(std::move(eo));
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<std::int64_t> timeout(kMinTimeoutNs, kMaxTimeoutNs);
  for (std::size_t i = 0; i < o.repeated; ++i) {
    Watch& w = watches_[i];
    w.timeout_ns = timeout(rng);
    w.not_before = kNever;
    timers_.push_back(std::make_unique<RepeatedTimer>(*engine_, "repeated-" + std::to_string(i),
                                                      Nanos(w.timeout_ns), [this, i] { on_run(i); }));
  }
  counts_.timers = o.repeated;
}

RepeatedLoad::~RepeatedLoad() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

std::string RepeatedLoad::start(const std::vector<unsigned>& cpus) {
  thread_ = std::thread([this] { control(); });
  return bind_thread(thread_.native_handle(), cpus);
}

void RepeatedLoad::on_run(std::size_t i) noexcept {
  // Relaxed load: only this engine's one worker stores it; release: pairs with worker_tid().
  if (worker_tid_.load(std::memory_order_relaxed) == 0)
    worker_tid_.store(current_tid(), std::memory_order_release);
  Watch& w = watches_[i];
  std::lock_guard lock(w.mutex);
  const std::int64_t t = Clock::now();
  ++w.runs;
  bool regular = true;
  if (t < w.not_before) {
    if (w.allowance) {
      w.allowance = false;
      ++w.begun_before;
      regular = false;
    } else if (w.not_before == kNever) {
      ++w.while_stopped;
      regular = false;
    } else {
      ++w.too_early;
    }
  }
  if (regular) w.not_before = Clock::now() + w.timeout_ns;
}

void RepeatedLoad::call(std::mt19937_64& rng) {
  const std::size_t i = std::uniform_int_distribution<std::size_t>(0, timers_.size() - 1)(rng);
  // Resets most, as a Raft follower's heartbeats do; stops and restarts less often.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const Call what = u < 0.3 ? Call::start : u < 0.65 ? Call::reset : u < 0.8 ? Call::stop : Call::restart;
  const std::int64_t timeout = std::uniform_int_distribution<std::int64_t>(kMinTimeoutNs, kMaxTimeoutNs)(rng);
  Watch& w = watches_[i];
  RepeatedTimer& timer = *timers_[i];
  std::lock_guard lock(w.mutex);
  const std::int64_t before = Clock::now();
  bool ok = true;
  switch (what) {
    case Call::start:
      ++counts_.starts;
      if (!w.running) w.arm(before);  // running: a no-op, nothing changes
      ok = timer.start();
      break;
    case Call::stop:
      ++counts_.stops;
      w.not_before = kNever;
      w.allowance = true;
      w.running = false;
      timer.stop();
      break;
    case Call::restart:
      ++counts_.restarts;
      w.arm(before);
      ok = timer.restart();
      break;
    case Call::reset:
      ++counts_.resets;
      w.timeout_ns = timeout;
      if (w.running) w.arm(before);  // stopped: only the timeout is stored
      ok = timer.reset(Nanos(timeout));
      break;
  }
  if (!ok) {
    ++counts_.refused;
    w.running = false;
    w.not_before = kNever;
  }
}

void RepeatedLoad::control() noexcept {
  control_tid_.store(current_tid(), std::memory_order_release);
  std::mt19937_64 rng(o_.seed + 1);
  std::uniform_int_distribution<std::int64_t> gap(0, kMaxGapNs);
  while (!stop_.load(std::memory_order_relaxed)) {
    if (!timers_.empty()) call(rng);
    Clock::sleep_until(Clock::now() + gap(rng));
  }
}

RepeatedReport RepeatedLoad::finish() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  timers_.clear();  // each destructor cancels its armed timer and waits for a run in progress
  RepeatedReport r = counts_;
  r.returned = engine_->stop([](Timer timer) noexcept { static_cast<void>(timer.cancel()); });
  r.engine = engine_->stats();
  for (std::size_t i = 0; i < o_.repeated; ++i) {
    const Watch& w = watches_[i];
    r.runs += w.runs;
    r.begun_before += w.begun_before;
    r.too_early += w.too_early;
    r.while_stopped += w.while_stopped;
  }
  return r;
}

}  // namespace tickwheel::stress
