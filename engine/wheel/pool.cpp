// engine/wheel/pool.cpp — growth and teardown of the node pool (the hot path is inline in
// tickwheel/detail/pool.hpp).
#include "tickwheel/detail/pool.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <system_error>

namespace tickwheel::detail {

NodePool::~NodePool() {
  // Each segment from its first node, which acquire_fresh() handed out as it mapped the segment
  // (or reserve() touched).
  for (unsigned seg = 0; seg < segments_; ++seg) {
    void* const first = at(static_cast<std::uint32_t>(segment_start(seg)));
    const std::size_t bytes = segment_nodes(seg) * sizeof(Node);
    if (locked_) unlock_memory(first, bytes);
    unmap_memory(first, bytes, arena_);
  }
}

bool NodePool::grow() noexcept {
  if (segments_ == kMaxSegments) return false;
  const unsigned seg = segments_;
  void* memory = map_memory(segment_nodes(seg) * sizeof(Node), arena_);
  if (memory == nullptr) return false;
  base_[seg] = reinterpret_cast<std::uintptr_t>(memory) - segment_start(seg) * sizeof(Node);
  mapped_ += segment_nodes(seg);
  ready_ = static_cast<std::uint32_t>(std::min(mapped_, kMaxNodes - 1));
  ++segments_;
  return true;
}

int NodePool::reserve(std::uint64_t nodes, bool lock) noexcept {
  assert(touched_ == 0 && "reserve() before the first acquire() only");
  nodes = std::min<std::uint64_t>(nodes, kMaxNodes - 1);
  while (mapped_ < nodes) {
    if (!grow()) return ENOMEM;
  }
  int refused = 0;
  for (unsigned seg = 0; seg < segments_ && segment_start(seg) < nodes; ++seg) {
    // Whole pages: a segment is a whole number of them, and its part below `nodes` is rounded up.
    const std::uint64_t count = std::min(segment_nodes(seg), nodes - segment_start(seg));
    const std::size_t bytes = (count * sizeof(Node) + kPage - 1) & ~(kPage - 1);
    const int err = commit_memory(at(static_cast<std::uint32_t>(segment_start(seg))), bytes, lock);
    if (err != 0 && refused == 0) refused = err;
  }
  reserved_ = std::max(reserved_, nodes);
  locked_ = locked_ || lock;  // a lock refused part-way may have locked earlier segments
  return refused;
}

std::string NodePool::describe_refusal(std::uint64_t nodes, int error) const {
  const std::string what = "a reserve of " + std::to_string(nodes) + " timers (" +
                           std::to_string(nodes * sizeof(Node)) + " bytes of node memory)";
  if (reserved_ < std::min<std::uint64_t>(nodes, kMaxNodes - 1)) {  // reserve() clamps as much
    return what + " could not be mapped: " + std::generic_category().message(error);
  }
  rlimit limit{};
  const std::string allowed = ::getrlimit(RLIMIT_MEMLOCK, &limit) != 0 ? "unknown"
                              : limit.rlim_cur == RLIM_INFINITY        ? "unlimited"
                                                                : std::to_string(limit.rlim_cur) + " bytes";
  return what + " was touched but not locked: mlock refused (" + std::generic_category().message(error) +
         "; RLIMIT_MEMLOCK is " + allowed +
         "): raise RLIMIT_MEMLOCK or grant CAP_IPC_LOCK, or leave lock_memory off";
}

Node* NodePool::acquire_fresh() noexcept {
  if (touched_ == std::numeric_limits<std::uint32_t>::max()) return nullptr;  // 2^32 - 1 nodes
  if (touched_ == mapped_ && !grow()) return nullptr;
  return first_touch();
}

}  // namespace tickwheel::detail
