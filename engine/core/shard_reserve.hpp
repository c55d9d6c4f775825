// engine/core/shard_reserve.hpp — a shard's node memory as other threads see it: the reserve of
// free nodes it keeps in its inbox for their schedules, topped up from its wheel's pool, and the
// node directory's locators of the nodes that pool hands out fresh.
//
// Threads: the shard's own thread only (its worker, or the thread that polls or owns it): the
// producers' side of the reserve is ShardInbox::take_nodes().
//
// The reserve starts small (a small process pays for what it uses, as the options promise when
// reserve_per_shard is 0) and its target doubles, up to a bound, each time a pass finds it emptied:
// producers then took nodes from their overflow pools, whose memory the shard keeps once those
// timers end, so without the growth every burst larger than the reserve would map overflow memory
// anew.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/directory.hpp"
#include "core/shard_host.hpp"
#include "core/shard_inbox.hpp"
#include "core/shard_wheel.hpp"
#include "tickwheel/engine_options.hpp"

namespace tickwheel::detail {

class ShardReserve {
 public:
  ShardReserve(ShardWheel& wheel, ShardInbox& inbox, ShardHost& host, std::size_t index,
               const EngineOptions& opts) noexcept;

  // The first fill, on the thread that prepares the shard (the pinned worker, so that it first
  // touches the memory): EngineOptions::reserve_per_shard reserved in the pool (a refusal noted
  // once, not fatal), then the reserve filled to its target.
  void prepare() noexcept;
  // After a pass: refills the reserve to its target if it fell below half of it.
  void refill() noexcept;
  // A node for a timer the shard's own thread schedules into its wheel; null if the pool is full.
  Node* own_node() noexcept {
    const std::uint32_t before = wheel_.pool().touched();
    Node* const node = wheel_.acquire_node();
    stamp_since(before);
    return node;
  }

 private:
  // ShardWheel::take_free_nodes, and the locators of the nodes handed out fresh.
  std::size_t take_wheel_nodes(std::span<Node*> out) noexcept;
  // Gives the nodes the wheel's pool handed out fresh since it had handed out `before` their
  // locators (a fresh node comes only once the free list is empty).
  void stamp_since(std::uint32_t before) noexcept {
    if (const std::uint32_t after = wheel_.pool().touched(); after != before) [[unlikely]] {
      host_.directory().stamp(wheel_.pool(), pool_map_, before, after);
    }
  }
  void fill(std::size_t want) noexcept;  // up to `want` free nodes into the reserve
  void reserve_memory() noexcept;        // EngineOptions::reserve_per_shard

  ShardWheel& wheel_;
  ShardInbox& inbox_;
  ShardHost& host_;
  const std::size_t index_;
  const std::size_t reserve_;  // EngineOptions::reserve_per_shard
  const bool lock_memory_;
  std::size_t target_;               // free nodes refill() aims at
  NodeDirectory::PoolMap pool_map_;  // the wheel pool's locators (see directory.hpp)
};

}  // namespace tickwheel::detail
