// engine/memory.cpp — anonymous mappings, huge-page aligned when large (see detail/memory.hpp).
#include "tickwheel/detail/memory.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace tickwheel::detail {

void* map_memory(std::size_t bytes) noexcept {
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
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void unmap_memory(void* address, std::size_t bytes) noexcept { ::munmap(address, bytes); }

}  // namespace tickwheel::detail
