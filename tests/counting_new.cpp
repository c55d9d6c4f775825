// Counting replacements of every global operator new / delete (plain, array, sized, aligned,
// nothrow), for the executables that check what allocates (counting_new.hpp). Linked into those
// executables only: every allocation of the process goes through them.
#include "counting_new.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
std::atomic<std::uint64_t> g_news{0};  // successful operator new calls, every variant

void* counted_alloc(std::size_t size, std::size_t align, bool nothrow) {
  if (size == 0) size = 1;
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else if (posix_memalign(&p, align, size) != 0) {
    p = nullptr;
  }
  if (p == nullptr) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  g_news.fetch_add(1, std::memory_order_relaxed);  // relaxed: a plain counter, read by this thread
  return p;
}
// Out of line: inlined into a delete-expression, a free() would meet the new-expression's pointer,
// and GCC's -Wmismatched-new-delete would flag the pair, though every operator new here allocates
// with malloc or aligned_alloc.
[[gnu::noinline]] void counted_free(void* p) noexcept { std::free(p); }
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, 0, false); }
void* operator new[](std::size_t n) { return counted_alloc(n, 0, false); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0, true); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0, true); }
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a), false);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a), false);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a), true);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a), true);
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }

namespace tickwheel::test {
// Relaxed: a plain counter, read by the thread that allocated or after a join.
std::uint64_t news() { return g_news.load(std::memory_order_relaxed); }
}  // namespace tickwheel::test
