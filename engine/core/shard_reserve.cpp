// engine/core/shard_reserve.cpp — a shard's reserve of free nodes for other threads' schedules.
#include "core/shard_reserve.hpp"

#include <string>

namespace tickwheel::detail {
namespace {

// The reserve's target: 1 Ki nodes at first (64 KiB of node memory per shard), at most 1 Mi
// (64 MiB).
constexpr std::size_t kReserveStart = std::size_t{1} << 10;
constexpr std::size_t kReserveMax = std::size_t{1} << 20;

}  // namespace

ShardReserve::ShardReserve(ShardWheel& wheel, ShardInbox& inbox, ShardHost& host, std::size_t index,
                           const EngineOptions& opts) noexcept
    : wheel_(wheel),
      inbox_(inbox),
      host_(host),
      index_(index),
      reserve_(opts.reserve_per_shard),
      lock_memory_(opts.lock_memory),
      target_(kReserveStart) {
  pool_map_.shard = static_cast<std::uint32_t>(index);
}

void ShardReserve::prepare() noexcept {
  if (reserve_ != 0) reserve_memory();
  fill(target_);
}

void ShardReserve::refill() noexcept {
  const std::size_t have = inbox_.reserve_size();
  if (have == 0 && target_ < kReserveMax) target_ *= 2;  // emptied since the last pass
  if (have < target_ / 2) fill(target_ - have);
}

void ShardReserve::fill(std::size_t want) noexcept {
  inbox_.fill_reserve(
      want, [this](std::span<Node*> out) { return take_wheel_nodes(out); },
      [this](Node* node) { wheel_.release_node(node); });
}

std::size_t ShardReserve::take_wheel_nodes(std::span<Node*> out) noexcept {
  const std::uint32_t before = wheel_.pool().touched();
  const std::size_t n = wheel_.take_free_nodes(out);
  stamp_since(before);  // fresh nodes come last, in index order (the free list is used up first)
  return n;
}

// The timers asked for plus the hand-out reserve that prepare() fills from the same pool next.
void ShardReserve::reserve_memory() noexcept {
  const std::uint64_t nodes = std::uint64_t{reserve_} + target_;
  const int err = wheel_.reserve(nodes, lock_memory_);
  if (err == 0) return;
  try {
    host_.note_once(ShardHost::Notice::reserve_refused, "tickwheel: shard " + std::to_string(index_) + ": " +
                                                            wheel_.describe_refusal(nodes, err));
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the line, or the log hook threw
  }
}

}  // namespace tickwheel::detail
