// engine/core/shard_host.hpp — what a shard needs from the engine that owns it, and nothing more: the
// clock, the notices, the error sink, the binding, an executor thread's producer token, and the
// path a cancel takes once it has won. EngineCore implements it; Shard knows only this, so
// shard.hpp and engine_core.hpp do not include each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "tickwheel/wheel_types.hpp"

namespace moodycamel {
struct ProducerToken;
}  // namespace moodycamel

namespace tickwheel {
class Moved;
}  // namespace tickwheel

namespace tickwheel::detail {

class NodeDirectory;
class Shard;
class Topology;
struct Node;

class ShardHost {
 public:
  // The notices an engine gives at most once each (through EngineOptions::log).
  enum class Notice : unsigned {
    binding_refused,
    callback_threw,
    more_shards_than_cores,
    reserve_refused,
    count
  };

  // The engine's clock (EngineOptions::clock, or CLOCK_MONOTONIC). Any thread.
  virtual Nanos now() const noexcept = 0;
  // One line through EngineOptions::log, the first time for each kind. May throw what building the
  // line or the log hook throws.
  virtual void note_once(Notice kind, const std::string& message) = 0;
  // A callback threw, on the calling thread: EngineOptions::on_callback_error, else one notice.
  virtual void report_callback_error(std::exception_ptr error) noexcept = 0;
  // Where the shards' threads bind (a worker binds itself before its first pass).
  virtual const Topology& topology() const noexcept = 0;
  // The calling thread's token for `shard`'s returned-node queue (an executor thread giving a node
  // back), registering the thread on its first use; null if out of memory.
  virtual moodycamel::ProducerToken* returned_token(std::size_t shard) noexcept = 0;
  // The engine's node directory (directory.hpp): a shard stamps the nodes its pool hands out fresh.
  virtual NodeDirectory& directory() noexcept = 0;
  // Timer::reschedule*() of the timer whose node holds `pending_gen` on `shard`, from a thread the
  // move must be posted from (not Shard::can_move_at_once()): see EngineCore. `when` is a deadline on
  // the engine's clock, or with `relative` a delay from it.
  virtual Moved reschedule(Shard& shard, Node* node, std::uint32_t pending_gen, Nanos when,
                           bool relative) noexcept = 0;
  // A cancel won on one of the shard's timers (Timer::cancel, any thread): see EngineCore.
  virtual void on_cancel(Shard& shard, Node* node, std::uint32_t cancelled_gen, bool linked) noexcept = 0;

  virtual ~ShardHost() = default;
  ShardHost(const ShardHost&) = delete;
  ShardHost& operator=(const ShardHost&) = delete;
  ShardHost(ShardHost&&) = delete;
  ShardHost& operator=(ShardHost&&) = delete;

 protected:
  ShardHost() = default;
};

}  // namespace tickwheel::detail
