// engine/pool.cpp — growth and teardown of the node pool (the hot path is inline in
// tickwheel/detail/pool.hpp).
#include "tickwheel/detail/pool.hpp"

#include <cstdint>
#include <limits>
#include <new>

namespace tickwheel::detail {

NodePool::~NodePool() {
  // Each segment from its first node, which acquire_fresh() handed out as it mapped the segment.
  for (unsigned seg = 0; seg < segments_; ++seg) {
    unmap_memory(at(static_cast<std::uint32_t>(segment_start(seg))), segment_nodes(seg) * sizeof(Node),
                 arena_);
  }
}

Node* NodePool::acquire_fresh() noexcept {
  if (touched_ == std::numeric_limits<std::uint32_t>::max()) return nullptr;  // 2^32 - 1 nodes
  if (touched_ == mapped_) {
    if (segments_ == kMaxSegments) return nullptr;
    const unsigned seg = segments_;
    void* memory = map_memory(segment_nodes(seg) * sizeof(Node), arena_);
    if (memory == nullptr) return nullptr;
    base_[seg] = reinterpret_cast<std::uintptr_t>(memory) - segment_start(seg) * sizeof(Node);
    mapped_ += segment_nodes(seg);
    ++segments_;
  }
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): placement new, in pool memory; nothing to own
  Node* node = ::new (static_cast<void*>(at(touched_))) Node{};  // first touch: gen 0, links null
  node->index = touched_;
  ++touched_;
  return node;
}

}  // namespace tickwheel::detail
