// stress/passes.hpp — every pass of every shard, as the engine reports it through
// EngineOptions::on_pass: the tick lag of each pass, its duration and its work (fires, level
// moves, hand-offs moved in, cancels taken), kept per shard as histograms.
//
// What it adds to the tick probes (workload.hpp): a probe samples the tick lag once per tick, from
// inside a callback, and cannot see how long a pass took or what it did; the hook sees every pass,
// with the engine's own clock reads (PassReport::start and end), so each figure is the engine's, not
// an estimate from outside.
//
// Tick lag and early passes. A pass's lag is start - planned, where planned is the wake-up the wait
// before it aimed at (the wheel's next deadline). Only passes that had one and started at or after
// it go into the lag histogram (lag >= 0, the same passes whose worst lag the engine keeps in
// ShardStats::max_tick_lag_ns, so the two maxima agree). A pass that started before its planned
// wake-up is not late by a negative amount: it was woken early, by a hand-off (sleep), by a spin
// (spin, hybrid: a spinning worker runs a pass on every poll, mostly before anything is due) or by
// a polling loop's own schedule (--threads manual). Those are counted apart (early), not clamped to
// zero, so that in spin mode the lag percentiles are still those of the passes that had something
// due; passes with nothing planned (an empty wheel) are counted apart too (unplanned).
//
// Recording without locks. A shard's passes run on one thread at a time (its worker, or the polling
// thread that calls Engine::poll, the engine ordering one poll after the previous), so each shard
// has a recorder of its own, written only by that thread: single-writer atomics (ConcurrentHistogram,
// Counter) that another thread may read while the run goes on, exact once the writer has been
// joined (after Engine::stop()). record() is a handful of histogram records and counter adds, no
// allocation, no lock, no system call; its cost (tens of ns, on cache lines of this shard's only)
// falls between two passes, after the pass read its end, so it is in no pass's duration but delays
// the worker's next wait by that much. With the hook set the engine reads the clock once more per
// pass (PassReport::end).
//
// Memory: six histograms of 58 KiB per shard, allocated once, before the engine starts.
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
  void record(const PassReport& pass) noexcept;

  // Written by the shard's pass thread, read at any time with relaxed loads (exact after stop()).
  ConcurrentHistogram tick_lag;     // start - planned, ns: passes with a planned wake-up, at or after it
  ConcurrentHistogram duration;     // end - start, ns: every pass
  ConcurrentHistogram fired;        // callbacks run (or handed to the executor), per pass
  ConcurrentHistogram moved;        // timers moved down a level of the wheel, per pass
  ConcurrentHistogram transferred;  // hand-offs moved into the wheel, per pass
  ConcurrentHistogram cancels;      // cancel records taken, per pass
  Counter passes;                   // every pass
  Counter early;                    // started before their planned wake-up (not in tick_lag)
  Counter unplanned;                // had no planned wake-up (not in tick_lag)
  Counter fired_total;
  Counter moved_total;
  Counter transferred_total;
  Counter cancels_total;
};

// The recorders of one engine, one per shard. Built before the engine (its address is the hook's
// context); sized with resize() once the engine knows its shard count, before it starts a thread.
class PassRecorders {
 public:
  // Before the engine's first pass: one recorder per shard, each counting from zero.
  void resize(std::size_t shards);

  // EngineOptions::on_pass, with this object as the context. A shard index past resize()'s count
  // (which the engine never reports) is dropped, counted nowhere.
  static void on_pass(void* context, const PassReport& pass) noexcept;

  std::span<const PassRecorder> shards() const noexcept { return {recorders_.get(), count_}; }
  std::size_t bytes() const noexcept { return count_ * sizeof(PassRecorder); }

 private:
  std::unique_ptr<PassRecorder[]> recorders_;
  std::size_t count_ = 0;
};

}  // namespace tickwheel::stress
