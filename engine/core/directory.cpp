// engine/core/directory.cpp — numbering node chunks and finding them again (see directory.hpp).
#include "core/directory.hpp"

#include <algorithm>
#include <new>

namespace tickwheel::detail {

NodeDirectory::~NodeDirectory() {
  for (auto& block : blocks_) {
    delete block.load(std::memory_order_relaxed);  // NOLINT(cppcoreguidelines-owning-memory): owned here
  }
}

NodeDirectory::Entry* NodeDirectory::entry(std::uint32_t chunk) const noexcept {
  Block* block = blocks_[chunk >> kBlockBits].load(std::memory_order_acquire);
  return block != nullptr ? &(*block)[chunk & ((std::uint32_t{1} << kBlockBits) - 1)] : nullptr;
}

void NodeDirectory::number_segment(const NodePool& pool, PoolMap& map, unsigned segment) noexcept {
  const std::uint64_t nodes = NodePool::segment_nodes(segment);
  const auto chunks = static_cast<std::uint32_t>(nodes >> kChunkBits);
  map.base[segment] = kNoLocator;
  // Relaxed: the ticket only has to be unique; the entries are published by `published` below.
  const std::uint32_t first = next_chunk_.fetch_add(chunks, std::memory_order_relaxed);
  if (first > kMaxChunks - chunks) {
    next_chunk_.fetch_sub(chunks, std::memory_order_relaxed);  // leave the rest for smaller segments
    return;
  }
  const auto start = static_cast<std::uint32_t>(NodePool::segment_start(segment));
  const Node* const base = pool.at(start);  // handed out (we are stamping it): mapped
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint32_t chunk = first + c;
    std::atomic<Block*>& slot = blocks_[chunk >> kBlockBits];
    Block* block = slot.load(std::memory_order_acquire);
    if (block == nullptr) {
      auto* fresh = new (std::nothrow) Block();  // NOLINT(cppcoreguidelines-owning-memory): owned by blocks_
      if (fresh == nullptr) return;              // no memory: the segment's nodes stay without locators
      // Release: publishes the constructed block to entry()'s acquire loads; acquire on failure:
      // the winner's block is then seen constructed.
      if (slot.compare_exchange_strong(block, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
        block = fresh;
      } else {
        delete fresh;  // NOLINT(cppcoreguidelines-owning-memory)
      }
    }
    Entry& e = (*block)[chunk & ((std::uint32_t{1} << kBlockBits) - 1)];
    // Relaxed: published to readers by the release store of `published` in stamp().
    // NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-pointer-arithmetic): inside the mapped segment
    e.first.store(reinterpret_cast<std::uintptr_t>(base + std::size_t{c} * (std::size_t{1} << kChunkBits)),
                  std::memory_order_relaxed);
    e.shard.store(map.shard, std::memory_order_relaxed);
  }
  map.base[segment] = first << kChunkBits;
}

void NodeDirectory::stamp(const NodePool& pool, PoolMap& map, std::uint32_t from, std::uint32_t to) noexcept {
  std::uint32_t i = from;
  while (i < to) {
    const unsigned segment = NodePool::segment_of(i);
    while (map.segments <= segment) number_segment(pool, map, map.segments++);
    const auto start = static_cast<std::uint32_t>(NodePool::segment_start(segment));
    // The nodes of [i, to) in this segment's chunk that holds i.
    const std::uint32_t chunk_end = std::min<std::uint64_t>(
        to, ((std::uint64_t{i} - start) | ((std::uint64_t{1} << kChunkBits) - 1)) + 1 + start);
    const std::uint32_t base = map.base[segment];
    for (std::uint32_t k = i; k < chunk_end; ++k) {
      Node* const node = pool.at(k);
      node->index = base == kNoLocator ? kNoLocator : base + (k - start);
      // Relaxed: no handle names a fresh node yet, and find() reads it only after the release below.
      node->gen.store(first_gen_, std::memory_order_relaxed);
    }
    if (base != kNoLocator) {
      const std::uint32_t locator = base + (i - start);
      if (Entry* e = entry(locator >> kChunkBits); e != nullptr) {
        // Release: the stamps above, and the node's construction by the pool before them, are
        // seen by a find() that loads this count with acquire.
        e->published.store((chunk_end - 1 - start) % (std::uint32_t{1} << kChunkBits) + 1,
                           std::memory_order_release);
      }
    }
    i = chunk_end;
  }
}

std::optional<NodeDirectory::Found> NodeDirectory::find(std::uint32_t locator) const noexcept {
  const std::uint32_t chunk = locator >> kChunkBits;
  const std::uint32_t offset = locator & ((std::uint32_t{1} << kChunkBits) - 1);
  if (chunk >= kMaxChunks) return std::nullopt;
  const Entry* e = entry(chunk);
  // Acquire: pairs with stamp()'s release, so the first `published` nodes of the chunk, their
  // construction and the entry's address and shard are all seen.
  if (e == nullptr || offset >= e->published.load(std::memory_order_acquire)) return std::nullopt;
  auto* first =
      reinterpret_cast<Node*>(e->first.load(std::memory_order_relaxed));  // NOLINT(performance-no-int-to-ptr)
  // NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-pointer-arithmetic): offset < published <= 4096
  return Found{first + offset, e->shard.load(std::memory_order_relaxed)};
}

}  // namespace tickwheel::detail
