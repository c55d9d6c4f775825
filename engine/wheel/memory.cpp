// engine/wheel/memory.cpp — blocks of the C allocator when small, anonymous mappings huge-page
// aligned when large, or blocks of a jemalloc arena (see detail/memory.hpp).
#include "tickwheel/detail/memory.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>

#if TICKWHEEL_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace tickwheel::detail {

#if TICKWHEEL_HAVE_JEMALLOC
namespace {
// Big blocks bypass the thread cache: they are few, long-lived, and may be freed on another thread.
int block_flags(unsigned arena) noexcept { return MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE; }
}  // namespace

unsigned create_arena() noexcept {
  unsigned arena = kNoArena;
  std::size_t size = sizeof(arena);
  if (mallctl("arenas.create", &arena, &size, nullptr, 0) != 0) return kNoArena;
  return arena;
}

void destroy_arena(unsigned arena) noexcept {
  if (arena == kNoArena) return;
  // Formatted on the stack: an engine torn down when memory has run out must not need any.
  std::array<char, 48> name{};
  (void)std::snprintf(name.data(), name.size(), "arena.%u.destroy", arena);
  mallctl(name.data(), nullptr, nullptr, nullptr, 0);
}
#else
unsigned create_arena() noexcept { return kNoArena; }
void destroy_arena(unsigned /*arena*/) noexcept {}
#endif

void* map_memory(std::size_t bytes, [[maybe_unused]] unsigned arena) noexcept {
  const bool huge = bytes >= kHugePage;
#if TICKWHEEL_HAVE_JEMALLOC
  if (arena != kNoArena) {
    void* block = mallocx(bytes, block_flags(arena) | (huge ? MALLOCX_ALIGN(kHugePage) : 0));
    if (block != nullptr && huge) ::madvise(block, bytes, MADV_HUGEPAGE);
    return block;
  }
#endif
  // Not operator new: a process that replaces it to catch allocation on its hot path is told of
  // a pool's growth by the reserve it lacks, not by a new-expression it never wrote. The block is
  // owned by the pool, which gives it back through unmap_memory().
  // NOLINTNEXTLINE(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory): as said above
  if (!huge) return std::aligned_alloc(kPage, bytes);
  const std::size_t request = bytes + kHugePage;
  void* raw =
      ::mmap(nullptr, request, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;

  // Trim the slack on both sides so that the kept range starts on a huge-page boundary. The
  // pointers are taken inside the mapping, from `raw`, not made from integers.
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::size_t head = ((start + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1)) - start;
  const std::size_t tail = request - head - bytes;
  const std::span<std::byte> mapping(static_cast<std::byte*>(raw), request);
  void* const aligned = mapping.subspan(head).data();
  if (head != 0) ::munmap(raw, head);
  if (tail != 0) ::munmap(mapping.subspan(head + bytes).data(), tail);
  ::madvise(aligned, bytes, MADV_HUGEPAGE);
  return aligned;
}

void unmap_memory(void* address, std::size_t bytes, [[maybe_unused]] unsigned arena) noexcept {
#if TICKWHEEL_HAVE_JEMALLOC
  if (arena != kNoArena) {
    dallocx(address, block_flags(arena));
    return;
  }
#endif
  if (bytes < kHugePage) {
    // NOLINTNEXTLINE(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory): from aligned_alloc
    std::free(address);
    return;
  }
  ::munmap(address, bytes);
}

void* map_zeroed(std::size_t bytes) {
  void* block = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) throw std::bad_alloc();
  return block;
}

void unmap_zeroed(void* address, std::size_t bytes) noexcept { ::munmap(address, bytes); }

// mlock and munlock by system call, not through the C library's wrappers: AddressSanitizer
// intercepts those and makes them succeed without locking anything, which would turn a refused
// lock into a silent no-op in exactly the builds that test the refusal.
int commit_memory(void* address, std::size_t bytes, bool lock) noexcept {
  std::memset(address, 0, bytes);
  if (lock && ::syscall(SYS_mlock, address, bytes) != 0) return errno;
  return 0;
}

void unlock_memory(void* address, std::size_t bytes) noexcept { ::syscall(SYS_munlock, address, bytes); }

}  // namespace tickwheel::detail
