// tickwheel/detail/node.hpp — the pooled, intrusive timer node. Not public API.
//
// One node is exactly one cache line and holds everything a pending timer costs: its list links,
// its deadline, its generation, and the user's callable stored inline. A schedule, a cancel and a
// fire each touch this one line of the node (plus, for list surgery, the neighbours' links).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace tickwheel::detail {

inline constexpr std::size_t kCacheLine = 64;

// Bytes of callable a node stores inline: three pointers, enough for `this`, an id and a pointer.
inline constexpr std::size_t kInlineCallableBytes = 24;

// Runs (when `invoke`) and then destroys the callable stored at `storage`. The destroy happens
// even when the call throws, so a throwing callback never leaks its captures.
using Thunk = void (*)(void* storage, bool invoke);

struct alignas(kCacheLine) Node {
  // List links, hlist style: `pprev` points at whatever points at this node (a slot's head or the
  // previous node's `next`), so unlinking needs no knowledge of which list the node is in.
  // pprev == nullptr  <=>  the node is not in any slot (free, or being fired).
  Node* next;
  Node** pprev;
  std::uint64_t due;   // deadline in ticks, rounded up to the tick
  // Generation and state of the node's current lifetime, in one word, so that a cancel and a
  // fire racing on different threads are decided by one compare-and-swap. A lifetime uses four
  // values: 4k+1 pending, 4k+2 fired (claimed to run), 4k+3 cancelled; the next lifetime starts
  // at 4(k+1)+1. A TimerId holds the pending value, so it matches only while its timer is pending,
  // and 0 (a fresh node, a failed id) never matches; a stale id could match again only after 2^30
  // lifetimes of one node. Memory order: see each use (a standalone Wheel uses relaxed throughout,
  // one thread touches it; the Engine's cross-thread uses name their pairings).
  std::atomic<std::uint32_t> gen;
  std::uint32_t index; // the node's position in its pool; fixed once the node is first handed out
  Thunk thunk;
  alignas(8) std::byte storage[kInlineCallableBytes];
};
static_assert(sizeof(Node) == kCacheLine, "a pending timer must cost exactly one cache line");
static_assert(std::is_trivially_destructible_v<Node>,
              "nodes live in mapped memory that is unmapped whole, never destroyed one by one");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// The states of a lifetime (gen & 3), and the first generation of the next lifetime.
inline constexpr std::uint32_t kPending = 1;
inline constexpr std::uint32_t kFired = 2;
inline constexpr std::uint32_t kCancelled = 3;
constexpr std::uint32_t next_lifetime(std::uint32_t gen) noexcept { return ((gen + 3) & ~3u) + kPending; }
static_assert(next_lifetime(0) == 1 && next_lifetime(2) == 5 && next_lifetime(3) == 5);

template <class F>
void thunk_for(void* storage, bool invoke) {
  F* fn = std::launder(static_cast<F*>(storage));
  struct Destroy {
    F* fn;
    ~Destroy() { fn->~F(); }
  } destroy{fn};
  if (invoke) (*fn)();
}

// Compile-time contract on what a node can store. Each failure names the fix.
template <class F>
constexpr void check_callable() {
  using Fn = std::decay_t<F>;
  static_assert(std::is_invocable_v<Fn&>, "tickwheel: the callback must be callable as fn()");
  static_assert(sizeof(Fn) <= kInlineCallableBytes,
                "tickwheel: the callback is larger than 24 bytes (three pointers). The node stores it "
                "inline so a timer never allocates; capture a pointer to your state instead.");
  static_assert(alignof(Fn) <= alignof(std::max_align_t) && alignof(Fn) <= 8,
                "tickwheel: the callback needs more than 8-byte alignment");
  static_assert(std::is_nothrow_constructible_v<Fn, F&&>,
                "tickwheel: constructing the callback may throw; schedule is noexcept, so capture "
                "only what moves or copies without throwing");
  static_assert(std::is_nothrow_destructible_v<Fn>, "tickwheel: the callback's destructor may throw");
}

// Destroys the callable stored in a node without running it.
inline void destroy_callable(Node* node) noexcept { node->thunk(node->storage, false); }

// Constructs the callable in the node and records how to run it. Precondition: check_callable<F>.
template <class F>
void store_callable(Node* node, F&& fn) noexcept {
  using Fn = std::decay_t<F>;
  ::new (static_cast<void*>(node->storage)) Fn(std::forward<F>(fn));
  node->thunk = &thunk_for<Fn>;
}

}  // namespace tickwheel::detail
