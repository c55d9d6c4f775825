// engine/pool.cpp — growth and teardown of the node pool (the hot path is inline in
// tickwheel/detail/pool.hpp).
#include "tickwheel/detail/pool.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <limits>

namespace tickwheel::detail {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Maps `bytes` of anonymous memory, committed lazily by first touch. A mapping of a huge page or
// more is aligned to a huge page and advised for transparent huge pages, so that random access to
// a large pool misses the data cache but not also the TLB. Returns the address, or nullptr.
void* map_segment(std::size_t bytes) noexcept {
  const bool huge = bytes >= kHugePage;
  const std::size_t request = huge ? bytes + kHugePage : bytes;
  void* raw = ::mmap(nullptr, request, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  if (!huge) return raw;

  // Trim the slack on both sides so that the kept range starts on a huge-page boundary.
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1);
  const std::size_t head = aligned - start;
  const std::size_t tail = request - head - bytes;
  if (head != 0) ::munmap(raw, head);
  if (tail != 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  // Advice only: where THP is disabled the pool still works, with 4 KiB pages.
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

NodePool::~NodePool() {
  for (unsigned seg = 0; seg < segments_; ++seg) {
    ::munmap(reinterpret_cast<void*>(base_[seg] + segment_start(seg) * sizeof(Node)),
             segment_nodes(seg) * sizeof(Node));
  }
}

Node* NodePool::acquire_fresh() noexcept {
  if (touched_ == std::numeric_limits<std::uint32_t>::max()) return nullptr;  // 2^32 - 1 nodes
  if (touched_ == mapped_) {
    if (segments_ == kMaxSegments) return nullptr;
    const unsigned seg = segments_;
    void* memory = map_segment(segment_nodes(seg) * sizeof(Node));
    if (memory == nullptr) return nullptr;
    base_[seg] = reinterpret_cast<std::uintptr_t>(memory) - segment_start(seg) * sizeof(Node);
    mapped_ += segment_nodes(seg);
    ++segments_;
  }
  Node* node = at(touched_);
  node->next = nullptr;
  node->pprev = nullptr;
  node->gen = 0;
  node->index = touched_;
  ++touched_;
  return node;
}

}  // namespace tickwheel::detail
