// engine/core/directory.hpp — the engine-wide directory that turns a compact timer handle
// (Timer::raw(), Engine::timer_from_raw()) back into its node and shard, without a lock and with
// every index validated, so that a forged or stale raw value is an empty or stale Timer, never a
// read of memory that is not node memory.
//
// Why a directory. A node's `index` is its position in its own pool, and an Engine's nodes come
// from many pools: each shard's wheel pool, and each producer thread's overflow pools (one per
// shard: a node of one never serves another shard). A pool index therefore names no node on its
// own. So every node an engine hands out is given, once, when its pool first hands it out, an
// engine-wide locator (kept in its `index` field, which nothing in an Engine reads otherwise), and
// the directory maps a locator back:
//
//   locator (32 bits) = chunk (20 bits) : offset (12 bits)
//
// A chunk is 4096 consecutive nodes of one pool segment (NodePool's segments are 4096 * 2^k nodes,
// so a segment is a whole number of chunks); chunks are numbered engine-wide as segments first
// hand out a node. An entry holds the address of its chunk's first node, the shard the pool serves,
// and how many of its nodes were handed out (a prefix: pools hand out fresh nodes in index order),
// published with release after their stamps; a lookup accepts only an offset below that count, so
// it reads only nodes that were constructed. The entries live in blocks of 4096, allocated as chunks
// are numbered (node memory is being mapped then anyway: never on a steady-state path).
//
// Limits: 2^20 - 1 chunks (2^32 - 4096 locators, 256 GiB of node memory per engine). A node whose
// segment found no room (past that, or no memory for a block) gets kNoLocator: its Timer's raw()
// is 0 (no handle), and everything else works as before.
//
// Generations. A raw value pairs a locator with a generation, and locators are dealt in the same
// order in every engine, so a raw value of another engine (or of a destroyed one) names a node here
// too. What keeps it from matching is the generation: stamp() starts each node's generation word at
// the engine's own `first_gen`, drawn per engine (see EngineCore), so two engines' nodes hold the same
// pending value only by a 1 in 2^30 chance.
//
// Threads: stamp() by the thread that owns the pool (a worker for its wheel's pool, a producer for
// its overflow pools); find() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/detail/pool.hpp"

namespace tickwheel::detail {

class NodeDirectory {
 public:
  static constexpr unsigned kChunkBits = NodePool::kFirstSegmentBits;  // 4096 nodes per chunk
  static constexpr unsigned kChunkNumberBits = 32 - kChunkBits;
  static constexpr std::uint32_t kMaxChunks = (std::uint32_t{1} << kChunkNumberBits) - 1;
  static constexpr std::uint32_t kNoLocator = ~std::uint32_t{0};  // never a chunk's: see kMaxChunks
  static constexpr unsigned kBlockBits = 12;                      // entries per block: 4096
  static_assert(NodePool::segment_nodes(0) == (std::uint64_t{1} << kChunkBits),
                "a pool segment must be a whole number of chunks");

  // What a pool has been given: the first locator of each of its segments numbered so far (or
  // kNoLocator), and the shard its nodes serve. Kept by the pool's owner beside the pool.
  struct PoolMap {
    std::array<std::uint32_t, NodePool::kMaxSegments> base{};
    unsigned segments = 0;  // segments numbered so far
    std::uint32_t shard = 0;
  };

  // `first_gen`: the generation word every node starts from (its first lifetime is
  // next_lifetime(first_gen)); a multiple of 4, so a node not yet scheduled holds no pending value.
  explicit NodeDirectory(std::uint32_t first_gen) noexcept : first_gen_(first_gen) {}
  ~NodeDirectory();
  NodeDirectory(const NodeDirectory&) = delete;
  NodeDirectory& operator=(const NodeDirectory&) = delete;
  NodeDirectory(NodeDirectory&&) = delete;
  NodeDirectory& operator=(NodeDirectory&&) = delete;

  // Gives the nodes [from, to) of `pool`, just handed out fresh (in index order, none published
  // yet), their locators and their first generation word, and publishes them. The pool's owner only. No
  // allocation but a block of entries when a segment needs one (see above).
  void stamp(const NodePool& pool, PoolMap& map, std::uint32_t from, std::uint32_t to) noexcept;

  struct Found {
    Node* node;
    std::uint32_t shard;
  };
  // The node with this locator, and its shard, if such a node was handed out; else nullopt. Any
  // thread: two acquire loads and a relaxed one.
  std::optional<Found> find(std::uint32_t locator) const noexcept;

 private:
  struct Entry {
    std::atomic<std::uintptr_t> first{0};  // address of the chunk's first node
    std::atomic<std::uint32_t> shard{0};
    // Nodes of the chunk handed out and stamped. Release after the stamps and the writes above;
    // find()'s acquire load pairs with it.
    std::atomic<std::uint32_t> published{0};
  };
  using Block = std::array<Entry, std::size_t{1} << kBlockBits>;
  static constexpr std::size_t kBlocks = (std::size_t{kMaxChunks} + 1) >> kBlockBits;

  void number_segment(const NodePool& pool, PoolMap& map, unsigned segment) noexcept;
  Entry* entry(std::uint32_t chunk) const noexcept;

  // Blocks, installed by compare-and-swap (two pools' owners may need the same block); acquire on
  // every load pairs with that release, so a block's entries are seen constructed.
  std::array<std::atomic<Block*>, kBlocks> blocks_{};
  std::atomic<std::uint32_t> next_chunk_{0};  // relaxed: a ticket, ordering nothing
  const std::uint32_t first_gen_;
};

}  // namespace tickwheel::detail
