// tickwheel/detail/memory.hpp — the project's one source of large, long-lived memory. Not public
// API (the node pool uses it, and so does the benchmark's heap baseline, so the two are compared
// on equal memory).
#pragma once

#include <cstddef>

namespace tickwheel::detail {

inline constexpr std::size_t kPage = std::size_t{4} << 10;  // the base page: what a fault maps
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Where memory comes from: kNoArena for the C allocator (below a huge page) and anonymous
// mappings of its own (from a huge page up), else a jemalloc arena made by create_arena() (the
// Engine gives each shard one, so that a shard's node memory never shares an extent with another's
// and is first touched by the shard's worker).
inline constexpr unsigned kNoArena = ~0U;

// A jemalloc arena of its own, or kNoArena when the library is built without jemalloc
// (TICKWHEEL_WITH_JEMALLOC=OFF) or jemalloc refuses. Construction paths only.
unsigned create_arena() noexcept;
// Destroys an arena from create_arena() once nothing allocated from it is left. kNoArena: no-op.
void destroy_arena(unsigned arena) noexcept;

// `bytes` of memory, page aligned. A block of a huge page or more is a mapping of its own (or an
// arena's extent), committed lazily by first touch, aligned to a huge page and advised for
// transparent huge pages, so that random access to it misses the data cache but not also the TLB
// (advice only: where THP is off it still works). A smaller block without an arena comes from the
// C allocator (aligned_alloc, which is jemalloc's where the library is built with it; never
// operator new). It hands a block given back earlier out again with its pages still committed, so
// a wheel made after another was destroyed takes no page fault filling its first segments, where a
// mapping of its own would fault every page anew. Returns nullptr if the memory cannot be had. May
// make a system call: growth paths only.
void* map_memory(std::size_t bytes, unsigned arena = kNoArena) noexcept;

// Returns a block from map_memory(bytes, arena).
void unmap_memory(void* address, std::size_t bytes, unsigned arena = kNoArena) noexcept;

// `bytes` of zeroed memory, page aligned: an anonymous mapping of its own, never a block of an
// allocator, so that each page is committed only when first written. For an array of which a
// process writes a small part, as a wheel writes only the slots its timers' deadlines fall in: the
// pages never written cost neither memory nor cache. Throws std::bad_alloc if it cannot be mapped.
// A system call: construction paths only.
void* map_zeroed(std::size_t bytes);

// Returns a block from map_zeroed(bytes).
void unmap_zeroed(void* address, std::size_t bytes) noexcept;

// Commits `bytes` of a block from map_memory() (or map_zeroed()) now, from `address` on, by
// writing zeros to every byte: each page is faulted in here, on the calling thread (so on its NUMA
// node under the first-touch policy), and later accesses to the range take no page fault. With
// `lock`, the range is then locked in memory (mlock(2)), so that it is never paged out either.
// Returns 0, or the errno of a refused lock (EPERM, or ENOMEM / EAGAIN past RLIMIT_MEMLOCK without
// CAP_IPC_LOCK): the range is then committed but not locked. Overwrites the range, so only for
// memory that holds nothing yet. Costs a write of every byte (the kernel zeroes each page as well)
// and a system call: construction and start-up paths only.
int commit_memory(void* address, std::size_t bytes, bool lock) noexcept;

// Undoes commit_memory(..., lock = true) for the range; harmless on memory that is not locked. A
// block going back to a jemalloc arena needs it (the arena keeps the pages mapped); munmap alone
// drops the lock.
void unlock_memory(void* address, std::size_t bytes) noexcept;

}  // namespace tickwheel::detail
