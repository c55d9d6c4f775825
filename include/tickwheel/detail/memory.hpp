// tickwheel/detail/memory.hpp — the project's one source of large, long-lived memory. Not public
// API (the node pool uses it, and so does the benchmark's heap baseline, so the two are compared
// on equal memory).
#pragma once

#include <cstddef>

namespace tickwheel::detail {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Maps `bytes` of anonymous memory, committed lazily by first touch. A mapping of a huge page or
// more is aligned to a huge page and advised for transparent huge pages, so that random access to
// it misses the data cache but not also the TLB (advice only: where THP is off it still works).
// Returns nullptr if the address space cannot be had. A system call: growth paths only.
void* map_memory(std::size_t bytes) noexcept;

// Returns a mapping from map_memory(bytes) to the operating system.
void unmap_memory(void* address, std::size_t bytes) noexcept;

}  // namespace tickwheel::detail
