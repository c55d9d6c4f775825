// tests/fuzz/engine/lifetimes.hpp — the callables' lifetimes, as Fire reports them: which are
// alive, which must die within the operation in progress, and when a death is allowed. A pending
// timer's callable must not die; a cancel destroys it before returning (a periodic timer out on a
// run: once the run is over), a one-shot's dies right after its run, and ~Engine destroys the rest
// without running them.
#pragma once

#include <cstdint>
#include <set>

#include "engine/model.hpp"
#include "fuzz_support.hpp"

namespace tickwheel::fuzz::engine {

class Lifetimes {
 public:
  explicit Lifetimes(const EngineModel& model) noexcept : model_(model) {}

  void born(std::uint32_t serial) { alive.insert(serial); }

  void died(std::uint32_t serial) {
    check(alive.erase(serial) == 1, "a callable was destroyed twice", serial);
    awaiting_death.erase(serial);
    const auto it = model_.recs.find(serial);
    if (it == model_.recs.end()) return;  // a failed schedule's callable
    const Rec& r = it->second;
    if (expect_death) {
      died_last = serial;
      return;
    }
    if (destroying) return;
    if (stop_clearing && model_.shards[r.shard].clear_posted) return;  // stop() serves a posted clear
    check(serial == cancelling || r.cancelled || r.ran, "the callable of a pending timer was destroyed",
          serial);
    check(r.where != Where::handed && r.where != Where::in_task && r.where != Where::running,
          "a callable was destroyed before or while its callback ran", serial);
  }

  std::set<std::uint32_t> alive;
  std::set<std::uint32_t> awaiting_death;  // ended timers whose callable must die in this operation
  bool destroying = false;                 // inside ~Engine
  bool stop_clearing = false;              // inside stop(), which serves the clears posted and not served
  std::uint32_t cancelling = 0;            // the timer whose cancel() is in progress
  bool expect_death = false;               // a cancel after stop(): the callable that dies names the timer
  std::uint32_t died_last = 0;             // ... and here it is

 private:
  const EngineModel& model_;
};

}  // namespace tickwheel::fuzz::engine
