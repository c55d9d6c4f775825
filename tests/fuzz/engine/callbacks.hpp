// tests/fuzz/engine/callbacks.hpp — the timers' callbacks: each run is checked against the model
// (inline inside a pass, or in a task of the queueing executor), then does what the bytes from the
// back of the input say: nothing, move the clock (a long callback), run queued tasks, cancel any
// timer (itself included), schedule a one-shot or a periodic timer (on its own shard, which links
// directly, or through another shard's queue), poll the other shard (nested) or its own (refused,
// while it is being polled), stop() (refused), throw, or (a byte 3 mod 8, by its high nibble) use
// the timer and shard API: reschedule any timer or itself, read a deadline, clear (at once or
// posted) or walk its own shard or another, try raw values.
#pragma once

#include <cstdint>
#include <exception>

#include "engine/model.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class Callbacks {
 public:
  explicit Callbacks(EngineRun& run) noexcept : run_(run) {}

  // Fire::operator(): a callback of the timer `serial` runs.
  void on_fire(std::uint32_t serial);
  // EngineOptions::on_callback_error: only what a callback threw, counted.
  void on_callback_error(std::exception_ptr e);

  bool quiet = false;          // callbacks take no action
  std::size_t maybe_ran = 0;   // tasks of maybe_handed timers run (PollOps::settle_hand_overs)
  bool error_handler = false;  // EngineOptions::on_callback_error is set
  std::uint64_t errors_reported = 0;

 private:
  void check_may_run(std::uint32_t serial, const Rec& r, const PollCtx& ctx);
  void run_inline(std::uint32_t serial, Rec& r, PollCtx& ctx);
  void after_inline_run(std::uint32_t serial, Rec& r, const PollCtx& ctx);
  void on_task(std::uint32_t serial, Rec& r);
  bool act(std::uint32_t serial, const Rec& r);
  void api_action(std::uint32_t serial, const Rec& r, std::uint8_t what);

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
