// tickwheel/detail/pool.hpp — the node pool a wheel owns. Not public API.
//
// Design: nodes live in segments of anonymous mapped memory (or of a jemalloc arena: use_arena()). Segment 0
// holds nodes [0, 4096), segment k >= 1 holds [4096 * 2^(k-1), 4096 * 2^k), so the pool doubles when it
// grows, a node's address is one table load and an add away from its index, and a 32-bit index reaches 2^32
// nodes in 21 segments. Segments of 2 MiB and more are aligned to 2 MiB and advised for transparent huge
// pages: a million random node accesses then cost data misses, not page walks as well.
//
// Memory is committed by first touch (nodes are handed out by bumping a high-water mark), recycled
// through an intrusive LIFO free list (the most recently freed node is the one most likely still in
// cache), and never returned to the operating system while the pool lives. That last rule is what
// makes a stale TimerId safe: reading the generation of a recycled node is always a valid read.
//
// Costs: acquire and release are a few instructions and touch only the node (plus the head of the
// free list). Growing maps one new segment: a system call, taken only while the pool is still
// growing, never in steady state. Single-threaded: the owning thread only.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "tickwheel/detail/memory.hpp"
#include "tickwheel/detail/node.hpp"

namespace tickwheel::detail {

class NodePool {
 public:
  static constexpr unsigned kFirstSegmentBits = 12;  // segment 0 holds 4096 nodes (256 KiB)
  static constexpr unsigned kMaxSegments = 21;
  static constexpr std::uint64_t kMaxNodes = std::uint64_t{1} << 32;

  NodePool() = default;
  ~NodePool();
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  // A node whose `index` is set and whose other fields are unspecified, or nullptr when the pool
  // cannot grow. O(1); maps a new segment only when the free list and the current segment are both
  // exhausted.
  Node* acquire() noexcept {
    if (Node* node = free_) {
      free_ = node->next;
      return node;
    }
    return acquire_fresh();
  }

  // Takes its segments from `arena` (a jemalloc arena, see detail/memory.hpp) instead of
  // mappings of their own. Before the first acquire() only; the arena must outlive the pool.
  void use_arena(unsigned arena) noexcept { arena_ = arena; }

  // Puts a node back. The caller has already ended its lifetime (generation bumped, callable gone).
  void release(Node* node) noexcept {
    node->pprev = nullptr;
    node->next = free_;
    free_ = node;
  }

  // The node with this index, or nullptr if no node with that index was ever handed out. O(1).
  Node* find(std::uint32_t index) const noexcept { return index < touched_ ? at(index) : nullptr; }

  // Precondition: index < touched().
  Node* at(std::uint32_t index) const noexcept {
    const unsigned seg = segment_of(index);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): base_ is biased on purpose, see there
    return reinterpret_cast<Node*>(base_[seg] + std::uintptr_t{index} * sizeof(Node));
  }

  std::uint32_t touched() const noexcept { return touched_; }  // nodes ever handed out
  std::uint64_t capacity() const noexcept { return mapped_; }  // nodes in mapped segments
  unsigned segments() const noexcept { return segments_; }     // segments mapped so far
  std::uint64_t bytes_touched() const noexcept { return std::uint64_t{touched_} * sizeof(Node); }

  static constexpr unsigned segment_of(std::uint32_t index) noexcept {
    return static_cast<unsigned>(std::bit_width(index >> kFirstSegmentBits));
  }
  static constexpr std::uint64_t segment_start(unsigned seg) noexcept {
    return seg == 0 ? 0 : (std::uint64_t{1} << (kFirstSegmentBits + seg - 1));
  }
  static constexpr std::uint64_t segment_nodes(unsigned seg) noexcept {
    return seg == 0 ? (std::uint64_t{1} << kFirstSegmentBits)
                    : (std::uint64_t{1} << (kFirstSegmentBits + seg - 1));
  }

 private:
  Node* acquire_fresh() noexcept;

  Node* free_ = nullptr;
  std::uint32_t touched_ = 0;
  std::uint64_t mapped_ = 0;
  unsigned segments_ = 0;
  unsigned arena_ = kNoArena;
  // base_[k] is the address of segment k minus segment_start(k) nodes, so that node i of segment k
  // is at base_[k] + i * 64 with no subtraction on the lookup path. Kept as integers: the biased
  // address need not point into any object.
  std::array<std::uintptr_t, kMaxSegments> base_{};
};

static_assert(NodePool::segment_of(0) == 0 && NodePool::segment_of(4095) == 0);
static_assert(NodePool::segment_of(4096) == 1 && NodePool::segment_of(8191) == 1);
static_assert(NodePool::segment_of(8192) == 2);
static_assert(NodePool::segment_of(0xFFFFFFFFU) == NodePool::kMaxSegments - 1);
static_assert(NodePool::segment_start(NodePool::kMaxSegments - 1) +
                  NodePool::segment_nodes(NodePool::kMaxSegments - 1) ==
              NodePool::kMaxNodes);

}  // namespace tickwheel::detail
