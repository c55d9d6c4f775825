// tests/fuzz/engine/run.hpp — one run of the engine target over one input: the engine, the model,
// and the parts that drive and check them, each a concept of its own file. The parts call one
// another through the run (a callback schedules, polls and cancels; a poll runs callbacks), so
// each holds the run, and the run holds every part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <typeinfo>

#include "engine/callbacks.hpp"
#include "engine/checks.hpp"
#include "engine/due_path.hpp"
#include "engine/executor.hpp"
#include "engine/handles.hpp"
#include "engine/lifetimes.hpp"
#include "engine/loop_wait.hpp"
#include "engine/model.hpp"
#include "engine/polls.hpp"
#include "engine/raw_values.hpp"
#include "engine/schedules.hpp"
#include "engine/setup.hpp"
#include "engine/shard_ops.hpp"
#include "engine/stop.hpp"
#include "fuzz_support.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

// Whether f() throws exactly an E (a refusal of the documented kind, not a type derived from it).
template <class E, class F>
bool throws(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return typeid(e) == typeid(E);
  }
  return false;
}

// Whether f() throws an E, or a type derived from it.
template <class E, class F>
bool catches(F&& f) {
  try {
    f();
  } catch (const E&) {
    return true;
  }
  return false;
}

class EngineRun {
 public:
  EngineRun(Bytes& input, std::size_t size) : in(input), due_path(*this, size) {}

  // The whole input: the options, every operation, stop() if none came, ~Engine.
  void run();
  // One operation, by its front byte (see fuzz_engine.cpp), and the checks after it.
  void step(std::uint8_t op);
  void check_invariants() { invariants.check_all(); }

  // The decoders the parts share.
  std::int64_t delay();
  std::size_t limit();
  std::uint32_t any_timer();  // a recorded timer; at least one must exist
  std::size_t pick_shard(std::uint8_t b) const;
  std::size_t api_shard(std::size_t own, std::uint8_t b) const;

  // Operations a callback may also do.
  void op_tasks();
  void op_handles();

  Bytes& in;
  EngineConfig config;
  EngineModel model{config};
  Lifetimes lifetimes{model};
  EngineSetup setup{*this};
  ScheduleOps schedules{*this};
  HandleOps handles{*this};
  RawValues raw_values{*this};
  ShardOps shard_ops{*this};
  LoopWait loop{*this};
  DuePath due_path;
  PollOps polling{*this};
  StopOp stopping{*this};
  Callbacks callbacks{*this};
  Invariants invariants{*this};
  std::shared_ptr<QueueExecutor> executor;  // null: callbacks run inline
  std::unique_ptr<Engine> engine;           // last: its callables and handler reach the parts above

 private:
  friend class Fire<EngineRun>;  // calls born(), on_fire() and died()

  void born(std::uint32_t serial) { lifetimes.born(serial); }
  void on_fire(std::uint32_t serial) { callbacks.on_fire(serial); }
  void died(std::uint32_t serial) { lifetimes.died(serial); }
  void op_api(std::uint8_t op);
};

}  // namespace tickwheel::fuzz::engine
