// tickwheel/detail/pool.hpp — the node pool a wheel owns. Not public API.
//
// Design: nodes live in segments from map_memory() (a jemalloc arena's: use_arena()). Segment 0
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
// free list). Growing takes one new segment from map_memory(): an allocation or a system call,
// taken only while the pool is still growing, never in steady state. Single-threaded: the owning
// thread only.
//
// Pre-sizing (reserve()). Without a reserve, the first touch of each page of node memory is a page
// fault taken by whichever acquire() first hands out a node there: a 4 KiB fault every 64 nodes,
// or, where the transparent huge page advice takes, one fault every 32768 nodes that zeroes 2 MiB
// (and, with the kernel's default defrag=madvise, may compact memory first). The first four
// segments (32768 nodes, 2 MiB) come from the C allocator, so their pages fault only where the
// process had not used that memory before. reserve(n) maps the segments for n nodes and
// first-touches them at once, on the calling thread, and can lock them (mlock), so that the first n
// nodes cost no fault and no system call when they are handed out. Growth past a reserve is what it
// is without one: one segment mapped at a time (a system call; mapping is lazy, so it costs the
// same whatever the segment's size) and each page faulted in by its first node, never a commit of a
// whole segment, let alone of the whole pool, in one call.
//
// Huge-page advice stays on by default: a fresh pool takes one fault per 2 MiB instead of one per
// 4 KiB page, and a large population fewer TLB misses; what it costs is fewer, larger faults (2 MiB
// zeroed each), the tail a reserve takes off the hot path. A process that wants none turns THP off
// for itself with prctl(PR_SET_THP_DISABLE) (tickwheel-bench --tickwheel_thp=off measures that).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>

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
  // exhausted. A node never handed out before is taken inline while its segment is mapped (a
  // fresh or reserved pool filling up), out of line only to grow.
  Node* acquire() noexcept {
    if (Node* node = take_recycled()) return node;
    if (touched_ < ready_) return first_touch();
    return acquire_fresh();
  }

  // The most recently released node, or nullptr if none waits: acquire() without its growth.
  Node* take_recycled() noexcept {
    Node* const node = free_;
    if (node != nullptr) free_ = node->next;
    return node;
  }

  // Maps and first-touches the memory of the first `nodes` nodes (at most kMaxNodes - 1) now, so
  // that handing them out later takes no page fault and no system call; with `lock`, also locks
  // that memory (mlock) until the pool is destroyed. Before the first acquire() only: it
  // overwrites the memory it touches. Returns 0; ENOMEM if a segment cannot be mapped (what was
  // mapped stays, for later growth); or the errno of a refused lock, with the memory touched but
  // not locked. Costs a mapping per segment and a write of every byte reserved (on the project's
  // VM, 3.4 ms per million nodes, 64 MiB, of memory it had used before; about 110 ms per million
  // where the VM's host must back the memory first): construction and start-up only.
  [[nodiscard]] int reserve(std::uint64_t nodes, bool lock) noexcept;
  // What a failed reserve(nodes, ...) that returned `error` means, in words, for an exception or a
  // notice: the size asked for and, for a refused lock, the RLIMIT_MEMLOCK in force and the way out.
  // Call it on the same pool, right after: whether the memory was mapped tells the two ENOMEMs apart.
  std::string describe_refusal(std::uint64_t nodes, int error) const;

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

  std::uint32_t touched() const noexcept { return touched_; }    // nodes ever handed out
  std::uint64_t reserved() const noexcept { return reserved_; }  // nodes first-touched by reserve()
  std::uint64_t capacity() const noexcept { return mapped_; }    // nodes in mapped segments
  unsigned segments() const noexcept { return segments_; }       // segments mapped so far
  // Node memory written so far: by nodes handed out, or by reserve().
  std::uint64_t bytes_touched() const noexcept {
    return std::max<std::uint64_t>(touched_, reserved_) * sizeof(Node);
  }

  // bit_width(index >> kFirstSegmentBits), with the first segment's low bits set instead of shifted
  // out, so that the scan's operand is never 0 and needs no branch: with a few thousand timers a
  // large share of the ids are in segment 0, and a branch on it was a coin toss on every cancel.
  static constexpr unsigned segment_of(std::uint32_t index) noexcept {
    constexpr std::uint32_t kLow = (std::uint32_t{1} << kFirstSegmentBits) - 1;
    const auto width = static_cast<unsigned>(std::bit_width(index | kLow));
    assert(width >= kFirstSegmentBits && width <= 32);  // kLow's bits are set: no wrap below
    return width - kFirstSegmentBits;
  }
  static constexpr std::uint64_t segment_start(unsigned seg) noexcept {
    return seg == 0 ? 0 : (std::uint64_t{1} << (kFirstSegmentBits + seg - 1));
  }
  static constexpr std::uint64_t segment_nodes(unsigned seg) noexcept {
    return seg == 0 ? (std::uint64_t{1} << kFirstSegmentBits)
                    : (std::uint64_t{1} << (kFirstSegmentBits + seg - 1));
  }

 private:
  // Hands out node touched_, in mapped memory and never handed out before: its first touch.
  // Default-initialised, not zeroed: the generation starts at 0 (std::atomic's default) and pprev
  // is null (in no slot, as for a released node); whoever takes the node writes every other field
  // before anything reads it, as for a recycled one. Zeroing the whole line was four more
  // stores on every schedule into a fresh pool (tickwheel-bench's `fresh` cases measure them).
  Node* first_touch() noexcept {
    // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): placement new, in pool memory; nothing to own
    Node* node = ::new (static_cast<void*>(at(touched_))) Node;
    node->pprev = nullptr;
    node->index = touched_++;
    return node;
  }
  Node* acquire_fresh() noexcept;
  bool grow() noexcept;  // maps the next segment; false if there is none or it cannot be mapped

  Node* free_ = nullptr;
  std::uint32_t touched_ = 0;
  std::uint32_t ready_ = 0;  // nodes acquire() may hand out without growing: mapped_, at most 2^32 - 1
  std::uint64_t mapped_ = 0;
  std::uint64_t reserved_ = 0;
  unsigned segments_ = 0;
  bool locked_ = false;  // reserve() locked its memory: unlocked before the segments go back
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
