// stress/passes.hpp — every pass of every shard, as the engine reports it through
// EngineOptions::on_pass: the tick lag of each pass, its duration and its work (fires, level
// moves, hand-offs moved in, cancels taken), kept per shard as histograms, one single-writer
// recorder per shard. Early passes, costs: docs/stress.md, "Every pass".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "histogram.hpp"
#include "tickwheel/engine.hpp"
#include "workload.hpp"

namespace tickwheel::stress {

// One shard's passes. Cache-line aligned: two shards' recorders are written by two threads.
class alignas(kCacheLine) PassRecorder {
 public:
  // The shard's pass thread only.
  void record(const PassReport& pass) noexcept {
    if (!pass.planned) {
      unplanned.add(1);
    } else if (pass.start < *pass.planned) {
      early.add(1);
    } else {
      tick_lag.record(static_cast<std::uint64_t>((pass.start - *pass.planned).count()));
    }
    // The engine's clock never goes back, so end >= start; a clock of the user's that did would
    // record 0 rather than wrap.
    const std::int64_t took = (pass.end - pass.start).count();
    duration.record(took > 0 ? static_cast<std::uint64_t>(took) : 0);
    fired.record(pass.fired);
    moved.record(pass.moved);
    transferred.record(pass.transferred);
    cancels.record(pass.cancels);
  }

  // Written by the shard's pass thread, read at any time with relaxed loads (exact after stop()).
  ConcurrentHistogram tick_lag;     // start - planned, ns: passes with a planned wake-up, at or after it
  ConcurrentHistogram duration;     // end - start, ns: every pass (its count: the passes)
  ConcurrentHistogram fired;        // callbacks run (or handed to the executor), per pass
  ConcurrentHistogram moved;        // timers moved down a level of the wheel, per pass
  ConcurrentHistogram transferred;  // hand-offs moved into the wheel, per pass
  ConcurrentHistogram cancels;      // cancel records taken, per pass
  Counter early;                    // started before their planned wake-up (not in tick_lag)
  Counter unplanned;                // had no planned wake-up (not in tick_lag)
};

// The recorders of one engine, one per shard. Built before the engine (its address is the hook's
// context); sized with resize() once the engine knows its shard count, before it starts a thread.
class PassRecorders {
 public:
  // Before the engine's first pass: one recorder per shard, each counting from zero.
  void resize(std::size_t shards) {
    recorders_ = std::make_unique<PassRecorder[]>(shards);
    count_ = shards;
  }

  // EngineOptions::on_pass, with this object as the context. A shard index past resize()'s count
  // (which the engine never reports) is dropped, counted nowhere.
  static void on_pass(void* context, const PassReport& pass) noexcept {
    auto* self = static_cast<PassRecorders*>(context);
    if (pass.shard < self->count_) self->recorders_[pass.shard].record(pass);
  }

  std::span<const PassRecorder> shards() const noexcept { return {recorders_.get(), count_}; }
  std::size_t bytes() const noexcept { return count_ * sizeof(PassRecorder); }

 private:
  std::unique_ptr<PassRecorder[]> recorders_;
  std::size_t count_ = 0;
};

}  // namespace tickwheel::stress
