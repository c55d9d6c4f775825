// tickwheel/detail/memory.hpp — the project's one source of large, long-lived memory. Not public
// API (the node pool uses it, and so does the benchmark's heap baseline, so the two are compared
// on equal memory).
#pragma once

#include <cstddef>

namespace tickwheel::detail {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Where memory comes from: kNoArena for anonymous mappings of its own, else a jemalloc arena made
// by create_arena() (the Engine gives each shard one, so that a shard's node memory never shares
// an extent with another's and is first touched by the shard's worker).
inline constexpr unsigned kNoArena = ~0U;

// A jemalloc arena of its own, or kNoArena when the library is built without jemalloc
// (TICKWHEEL_WITH_JEMALLOC=OFF) or jemalloc refuses. Construction paths only.
unsigned create_arena() noexcept;
// Destroys an arena from create_arena() once nothing allocated from it is left. kNoArena: no-op.
void destroy_arena(unsigned arena) noexcept;

// `bytes` of memory, committed lazily by first touch. A block of a huge page or more is aligned
// to a huge page and advised for transparent huge pages, so that random access to it misses the
// data cache but not also the TLB (advice only: where THP is off it still works). Returns nullptr
// if the memory cannot be had. A system call: growth paths only.
void* map_memory(std::size_t bytes, unsigned arena = kNoArena) noexcept;

// Returns a block from map_memory(bytes, arena).
void unmap_memory(void* address, std::size_t bytes, unsigned arena = kNoArena) noexcept;

}  // namespace tickwheel::detail
