// tickwheel/detail/node.hpp — the pooled, intrusive timer node. Not public API.
//
// One node is exactly one cache line and holds everything a pending timer costs: its list links,
// its deadline, its generation, and the user's callable stored inline. A schedule, a cancel and a
// fire each touch this one line of the node (plus, for list surgery, the neighbours' links).
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace tickwheel::detail {

inline constexpr std::size_t kCacheLine = 64;

// Bytes of callable a node stores inline: three pointers, enough for `this`, an id and a pointer.
inline constexpr std::size_t kInlineCallableBytes = 24;
// Their alignment: a pointer's. A callable that needs more is refused (check_callable_traits).
inline constexpr std::size_t kInlineCallableAlign = 8;

// A periodic timer keeps its schedule (see PeriodicMeta) in the first 8 bytes of that storage and
// its callable in the rest: two pointers.
inline constexpr std::size_t kMetaBytes = 8;
inline constexpr std::size_t kPeriodicCallableBytes = kInlineCallableBytes - kMetaBytes;

// What the wheel asks of a stored callable's thunk, the only code that knows the callable's type.
enum class Op : std::uint8_t {
  run,      // one-shot: run, then destroy (even if the call throws). Periodic: run, keep.
  destroy,  // destroy without running
};
using Thunk = void (*)(void* storage, Op op);

// Node::thunk is the thunk's address plus two tags in its low bits, which the thunks' alignment
// (kThunkAlign) keeps free. They answer the two questions the hot paths ask of every node without
// an indirect call: whether it is periodic (a fire's first question; its schedule word then leads
// the storage, see callable_meta()) and whether a cancel has a destructor to run.
inline constexpr std::uintptr_t kPeriodicTag = 1;
inline constexpr std::uintptr_t kDestructorTag = 2;
inline constexpr std::uintptr_t kTagMask = kPeriodicTag | kDestructorTag;
inline constexpr std::size_t kThunkAlign = 16;
static_assert(kThunkAlign > kTagMask, "the tags must fit below the thunks' alignment");

// NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): NodePool::first_touch() default-initialises
struct alignas(kCacheLine) Node {
  // List links, hlist style: `pprev` points at whatever points at this node (a slot's head or the
  // previous node's `next`), so unlinking needs no knowledge of which list the node is in.
  // pprev == nullptr  <=>  the node is not in any slot (free, or being fired).
  Node* next;
  Node** pprev;
  // The deadline, in ticks (rounded up, clamped to the horizon: TickDivider::due), wherever the node
  // is: in a wheel, in an Engine's hand-off queue (the producer divided, by a multiplication), and
  // when an executor gives a periodic node back (for a fixed-delay timer, the tick of its next run,
  // which the executor's thread computed when the run ended).
  std::uint64_t due;
  // Generation and state of the node's current lifetime, in one word, so that a cancel and a fire
  // racing on different threads are decided by one compare-and-swap. Lifetime k uses four values:
  //
  //   4k+1 pending    linked in the wheel (or in an Engine's hand-off queue); a TimerId holds this
  //   4k+2 fired      a one-shot timer claimed to run: terminal
  //   4k+3 cancelled  terminal
  //   4k+4 running    a periodic timer claimed to run (the value is 4(k+1), so (gen & 3) == 0)
  //
  //   one-shot:  pending --claim--> fired
  //              pending --cancel-> cancelled
  //   periodic:  pending --claim--> running --re-arm--> pending   (same value: the id stays valid)
  //              pending --cancel-> cancelled
  //              running --cancel-> cancelled  (the run in progress finishes; no further run, and
  //                                             the fire path, finding the re-arm refused,
  //                                             destroys the callable and recycles the node)
  //
  // A periodic timer ends only by a cancel (or is dropped, pending, with its wheel). The next
  // lifetime starts at next_lifetime(gen) = 4(k+1)+1 from either terminal state, and from running
  // too (4k+4 -> 4k+5), so no state can hand a node out with a generation still in use. A TimerId
  // holds the pending value, so it matches only while its timer is pending (or, as pending + 3,
  // while its periodic timer runs), and 0 (a fresh node, a failed id) never matches a pending
  // value (an Engine's fresh nodes hold a multiple of 4 of their engine's own, stamped by its node
  // directory); a stale id could match again only after 2^30 lifetimes of one node. (Running in
  // the last lifetime, k = 2^30 - 1, wraps to 0: harmless, as ids compare with the same wrap.) Memory order:
  // see each use (a standalone Wheel uses relaxed throughout, one thread touches it; the Engine's
  // cross-thread uses name their pairings).
  std::atomic<std::uint32_t> gen;
  std::uint32_t index;   // the node's position in its pool; fixed once the node is first handed out
  std::uintptr_t thunk;  // the thunk's address plus its tags, see kPeriodicTag
  alignas(kInlineCallableAlign) std::array<std::byte, kInlineCallableBytes> storage;
};
static_assert(sizeof(Node) == kCacheLine, "a pending timer must cost exactly one cache line");

// Node::due through std::atomic_ref, for the writes that Timer::deadline() can race. An Engine's
// timer may be asked for its deadline from any thread while the thread that holds the node writes
// `due` (the shard moving or re-arming it, a producer starting the node's next lifetime, an
// executor's thread giving a fixed-delay run back), so those writes are atomic and the reader uses
// load_due(). Reads by the holding thread stay plain: it is the only writer then, and two reads do
// not race. The standalone Wheel has one thread and writes `due` plainly, or through store_due()
// with std::memory_order_relaxed in the code it shares with the Engine:
// a relaxed 8-byte store is a plain mov on x86-64, so it costs the Wheel nothing.
//
// The Engine's writes are release (a plain mov on x86-64 too): the reader's acquire fence after its
// load of `due` then pairs with whichever write it read, so that every change of the generation
// that came before that write (the end of the reader's lifetime of the node, if the write belongs
// to a later one) is visible to its second load of the generation (see ShardWheel::deadline_of()).
inline void store_due(Node* node, std::uint64_t due, std::memory_order order) noexcept {
  std::atomic_ref<std::uint64_t>(node->due).store(due, order);
}
inline std::uint64_t load_due(Node* node) noexcept {
  // Relaxed: the caller brackets it between two loads of the generation (see store_due()).
  return std::atomic_ref<std::uint64_t>(node->due).load(std::memory_order_relaxed);
}
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
static_assert(alignof(std::uint64_t) >= std::atomic_ref<std::uint64_t>::required_alignment,
              "Node::due must be aligned for std::atomic_ref");
static_assert(std::is_trivially_destructible_v<Node>,
              "nodes live in mapped memory that is unmapped whole, never destroyed one by one");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// Prefetch a node whose links we will write soon.
inline void prefetch_node(const void* node) noexcept { __builtin_prefetch(node, 1, 3); }

// Prefetch the two nodes whose links an unlink of `node` writes: the one `pprev` points into (or
// the slot's head line) and the next one. Issued when a cancel or a reschedule queues the node,
// just after the node's own line has come in, so that by the time the batch is flushed (31 calls
// later) the neighbours have arrived and the flush finds them in cache: their misses overlap with
// the caller's work instead of stalling the flush. A null `next` is prefetched too: a prefetch
// never faults, and a branch here would mispredict on the last node of a sub-list.
inline void prefetch_neighbours(const Node* node) noexcept {
  prefetch_node(node->pprev);
  prefetch_node(node->next);
}

// The states of a lifetime, as offsets from 4k: (gen & 3) names the state, 0 meaning running.
inline constexpr std::uint32_t kPending = 1;
inline constexpr std::uint32_t kFired = 2;
inline constexpr std::uint32_t kCancelled = 3;
inline constexpr std::uint32_t kRunning = 4;
constexpr std::uint32_t next_lifetime(std::uint32_t gen) noexcept { return ((gen + 3) & ~3U) + kPending; }
// The value, in `state` (kPending, kFired, kCancelled or kRunning), of the lifetime whose pending
// value is `pending`: the one spelling of the state arithmetic, wherever a generation word is read.
constexpr std::uint32_t in_state(std::uint32_t pending, std::uint32_t state) noexcept {
  return pending - kPending + state;
}
// The pending value of the lifetime a running value belongs to.
constexpr std::uint32_t pending_of_running(std::uint32_t running) noexcept {
  return running - kRunning + kPending;
}
static_assert(in_state(5, kCancelled) == 7 && in_state(5, kRunning) == 8 && pending_of_running(8) == 5);
static_assert(next_lifetime(0) == 1 && next_lifetime(2) == 5 && next_lifetime(3) == 5 &&
              next_lifetime(4) == 5);
static_assert(next_lifetime(0xFFFFFFFFU) == 1, "the last lifetime's cancelled state wraps to the first");

// The thunks are aligned (a GCC and Clang attribute) so that their addresses leave the tags free.
template <class F>
[[gnu::aligned(kThunkAlign)]] void thunk_for(void* storage, Op op) {
  F* fn = std::launder(static_cast<F*>(storage));
  struct Destroy {
    F* fn;
    explicit Destroy(F* f) noexcept : fn(f) {}
    Destroy(const Destroy&) = delete;
    Destroy& operator=(const Destroy&) = delete;
    ~Destroy() { fn->~F(); }
  } destroy(fn);
  if (op == Op::run) (*fn)();
}

template <class F>
[[gnu::aligned(kThunkAlign)]] void periodic_thunk_for(void* storage, Op op) {
  // The callable sits kMetaBytes into the type-erased storage; check_periodic_callable<F> bounds it.
  // NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-pointer-arithmetic): an offset inside the storage
  F* fn = std::launder(reinterpret_cast<F*>(static_cast<std::byte*>(storage) + kMetaBytes));
  if (op == Op::run) {
    (*fn)();
  } else {
    fn->~F();
  }
}

// The schedule word of a periodic timer: the period in nanoseconds in the low 60 bits, the cadence
// in bit 60, the misfire policy in bits 61-62. The enums' values are the public ones (wheel.hpp);
// here they are only numbers, so that this header stays below the public API.
struct PeriodicMeta {
  static constexpr unsigned kPeriodBits = 60;
  static constexpr std::uint64_t kMaxPeriod = (std::uint64_t{1} << kPeriodBits) - 1;

  static constexpr std::uint64_t make(std::uint64_t period_ns, unsigned cadence, unsigned misfire) noexcept {
    return period_ns | (std::uint64_t{cadence} << kPeriodBits) |
           (std::uint64_t{misfire} << (kPeriodBits + 1));
  }
  static constexpr std::uint64_t period(std::uint64_t meta) noexcept { return meta & kMaxPeriod; }
  static constexpr unsigned cadence(std::uint64_t meta) noexcept {
    return static_cast<unsigned>(meta >> kPeriodBits) & 1;
  }
  static constexpr unsigned misfire(std::uint64_t meta) noexcept {
    return static_cast<unsigned>(meta >> (kPeriodBits + 1)) & 3;
  }
};
static_assert(PeriodicMeta::period(PeriodicMeta::make(PeriodicMeta::kMaxPeriod, 1, 2)) ==
              PeriodicMeta::kMaxPeriod);
static_assert(PeriodicMeta::cadence(PeriodicMeta::make(5, 1, 2)) == 1 &&
              PeriodicMeta::misfire(PeriodicMeta::make(5, 1, 2)) == 2);

// Compile-time contract on what a node can store, apart from its size. Each failure names the fix.
template <class F>
constexpr void check_callable_traits() {
  using Fn = std::decay_t<F>;
  static_assert(std::is_invocable_v<Fn&>, "tickwheel: the callback must be callable as fn()");
  static_assert(alignof(Fn) <= kInlineCallableAlign,
                "tickwheel: the callback needs more than 8-byte alignment");
  static_assert(std::is_nothrow_constructible_v<Fn, F&&>,
                "tickwheel: constructing the callback may throw; schedule is noexcept, so capture "
                "only what moves or copies without throwing");
  static_assert(std::is_nothrow_destructible_v<Fn>, "tickwheel: the callback's destructor may throw");
}

template <class F>
constexpr void check_callable() {
  static_assert(sizeof(std::decay_t<F>) <= kInlineCallableBytes,
                "tickwheel: the callback is larger than 24 bytes (three pointers). The node stores it "
                "inline so a timer never allocates; capture a pointer to your state instead.");
  check_callable_traits<F>();
}

template <class F>
constexpr void check_periodic_callable() {
  static_assert(sizeof(std::decay_t<F>) <= kPeriodicCallableBytes,
                "tickwheel: the periodic callback is larger than 16 bytes (two pointers). The node "
                "stores it inline beside the 8-byte schedule word so a period never allocates; "
                "capture a pointer to your state instead.");
  check_callable_traits<F>();
}

// Whether a callable is a null function pointer (the one callable a schedule can tell will not
// run). A compile-time false for anything else, so a lambda's schedule pays nothing for it.
template <class F>
constexpr bool is_null_callable(const F& fn) noexcept {
  if constexpr (std::is_pointer_v<std::remove_cvref_t<F>>) {
    return fn == nullptr;
  } else {
    return false;
  }
}

// The thunk word for `thunk` with `tags`; a debug build checks that the address leaves them free.
inline std::uintptr_t tagged_thunk(Thunk thunk, std::uintptr_t tags) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(thunk);
  assert((address & kTagMask) == 0 && "a thunk is not aligned as kThunkAlign asks");
  return address + tags;
}

// Calls the node's thunk: the callable's code, with the tags taken off its address.
inline void call_thunk(Node* node, Op op) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the address tagged_thunk() stored, tags removed
  reinterpret_cast<Thunk>(node->thunk & ~kTagMask)(node->storage.data(), op);
}

// Runs the stored callable; a one-shot's is destroyed on the way out, even if it throws.
inline void run_callable(Node* node) { call_thunk(node, Op::run); }

// Destroys the callable stored in a node without running it: no call at all for a callable with
// nothing to destroy (trivially destructible), the common lambda of pointers and integers.
inline void destroy_callable(Node* node) noexcept {
  if ((node->thunk & kDestructorTag) != 0) call_thunk(node, Op::destroy);
}

// 0 for a one-shot timer; a periodic timer's schedule word (see PeriodicMeta), never 0. Read from
// the node alone, and still right after a one-shot run destroyed the callable.
inline std::uint64_t callable_meta(const Node* node) noexcept {
  if ((node->thunk & kPeriodicTag) == 0) return 0;
  std::uint64_t meta = 0;
  std::memcpy(&meta, node->storage.data(), sizeof meta);
  return meta;
}

template <class Fn>
constexpr std::uintptr_t destructor_tag() noexcept {
  return std::is_trivially_destructible_v<Fn> ? 0 : kDestructorTag;
}

// Constructs the callable in the node and records how to run it. Precondition: check_callable<F>.
template <class F>
void store_callable(Node* node, F&& fn) noexcept {
  using Fn = std::decay_t<F>;
  ::new (static_cast<void*>(node->storage.data())) Fn(std::forward<F>(fn));
  node->thunk = tagged_thunk(&thunk_for<Fn>, destructor_tag<Fn>());
}

// The same for a periodic timer, with its schedule word (never 0) in front of the callable.
// Precondition: check_periodic_callable<F>.
template <class F>
void store_periodic_callable(Node* node, std::uint64_t meta, F&& fn) noexcept {
  using Fn = std::decay_t<F>;
  std::memcpy(node->storage.data(), &meta, sizeof meta);
  ::new (static_cast<void*>(&node->storage[kMetaBytes])) Fn(std::forward<F>(fn));
  node->thunk = tagged_thunk(&periodic_thunk_for<Fn>, kPeriodicTag | destructor_tag<Fn>());
}

}  // namespace tickwheel::detail
