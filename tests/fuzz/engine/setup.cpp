// tests/fuzz/engine/setup.cpp — decoding the engine's options, and checking their validation.
#include "engine/setup.hpp"

#include <exception>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "engine/clock.hpp"
#include "engine/run.hpp"

namespace tickwheel::fuzz::engine {

void EngineSetup::build() {
  const std::uint8_t c = decode_config();
  EngineOptions opts = options(c);
  run_.engine = std::make_unique<Engine>(std::move(opts));
  run_.model.start(g_clock);
  const EngineConfig& cfg = run_.config;
  check(run_.engine->shard_count() == cfg.shards && run_.engine->tick().count() == cfg.tick,
        "shard_count() or tick()");
  const QueueExecutor* executor = run_.executor.get();
  TICKWHEEL_FUZZ_TRACE("engine: %zu shards, tick %lld ns, cap %zu, max_pending %zu, clock %lld, %s",
                       cfg.shards, ll(cfg.tick), cfg.cap, cfg.max_pending, ll(g_clock),
                       executor != nullptr
                           ? (executor->any_thread() ? "queueing executor, any thread" : "queueing executor")
                           : "inline");
}

// The shards and tick (byte a), transfer_cap and max_pending_per_shard (byte b), the clock's start
// (byte c, which then picks the executor and the error handler: see options()).
std::uint8_t EngineSetup::decode_config() {
  static constexpr std::int64_t kTicks[] = {1'000'000, 1'000, 7'000, 1'234'567};
  Bytes& in = run_.in;
  EngineConfig& cfg = run_.config;
  const std::uint8_t a = in.u8();
  if (a >= 0xF8) check_option_validation();
  cfg.shards = 1 + (a & 1);
  cfg.tick = kTicks[(a >> 1) % std::size(kTicks)];
  cfg.max_tick = static_cast<std::uint64_t>(kI64Max / cfg.tick);
  const std::uint8_t b = in.u8();
  cfg.cap = (b & 3) == 0 ? 100'000 : (b & 3);
  cfg.max_pending = b >= 0xC0 ? 1 + (b >> 2) % 8 : 0;
  const std::uint8_t c = in.u8();
  switch (c % 4) {
    case 1: g_clock = sat_mul(in.u16(), cfg.tick); break;
    case 2: g_clock = static_cast<std::int64_t>(in.u64() >> 2); break;
    case 3: g_clock = kI64Max - sat_mul(in.u16(), cfg.tick); break;
    default: g_clock = 1'000'000'000'000; break;
  }
  return c;
}

EngineOptions EngineSetup::options(std::uint8_t c) {
  const EngineConfig& cfg = run_.config;
  EngineOptions opts;
  opts.shards = cfg.shards;
  opts.tick = Nanos(cfg.tick);
  opts.transfer_cap = cfg.cap;
  opts.max_pending_per_shard = cfg.max_pending;
  opts.log = [](std::string_view) {};  // the throw notice is expected; keep the fuzzer's output clean
  opts.threads = Threads::manual;
  opts.clock = &fuzz_clock;
  switch ((c >> 2) % 8) {
    case 5: opts.executor = std::make_shared<InlineExecutor>(); break;  // the same as none
    case 6:
    case 7:
      // any_thread() half the time: false keeps every hand-over inside poll().
      run_.executor = std::make_shared<QueueExecutor>(run_.model.polls, (c & 0x40) != 0);
      opts.executor = run_.executor;
      break;
    default: break;
  }
  if ((c & 0x20) != 0) {
    run_.callbacks.error_handler = true;
    opts.on_callback_error = [this](std::exception_ptr e) { run_.callbacks.on_callback_error(std::move(e)); };
  }
  return opts;
}

// A raw set of options: the constructor must throw std::invalid_argument exactly when one is
// outside its documented range. (Threads::workers is valid, with a clock of one's own too since
// workers read it; it is not built here, since its workers would start threads.)
void EngineSetup::check_option_validation() {
  const std::uint8_t k = run_.in.u8();
  EngineOptions opts;
  opts.shards = 1 + k % 2;
  opts.threads = Threads::manual;
  opts.clock = &fuzz_clock;
  opts.log = [](std::string_view) {};
  bool valid = true;
  switch (k % 5) {
    case 0:
      opts.tick = Nanos((k & 8) != 0 ? 999 : 3'600'000'000'001);
      valid = false;
      break;
    case 1:
      opts.transfer_cap = 0;
      valid = false;
      break;
    case 2:
      opts.shards = 4097;
      valid = false;
      break;
    case 3:
      opts.hybrid_spin = Nanos(-1);
      valid = false;
      break;
    default:
      if ((k & 8) != 0) {
        opts.lock_memory = true;  // with no reserve to lock
      } else {
        opts.max_pending_per_shard = 10;
        opts.reserve_per_shard = 11;
      }
      valid = false;
      break;
  }
  bool threw = false;
  try {
    Engine e(std::move(opts));
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw != valid, "the constructor's validation disagrees with the documented ranges", k);
}

}  // namespace tickwheel::fuzz::engine
