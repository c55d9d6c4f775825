// engine/core/producer.cpp — a producer thread's registration (see producer.hpp).
#include "core/producer.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <new>

namespace tickwheel::detail {
namespace {

thread_local unsigned t_next_victim = 0;  // the next entry of t_producer_states to reuse

// A number unique to each thread that ever registers, unlike std::thread::id, which the system
// reuses once a thread is joined: it tells a new thread taking over an exited thread's state from
// the same thread coming back after its table entry was evicted.
std::atomic<std::uint64_t> g_next_thread_serial{1};
std::uint64_t thread_serial() noexcept {
  thread_local const std::uint64_t serial = g_next_thread_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

}  // namespace

bool cpu_has_prefetchw() noexcept {
#if defined(__x86_64__)
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  return __get_cpuid(0x80000001U, &a, &b, &c, &d) != 0 && (c & bit_PRFCHW) != 0;
#else
  return false;
#endif
}

ProducerState::ProducerState(std::thread::id id, const std::vector<std::unique_ptr<Shard>>& all)
    : owner(id), shards(all.size()) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    shards[i].transfer = std::make_unique<moodycamel::ProducerToken>(all[i]->inbox.transfers());
    shards[i].cancel = std::make_unique<moodycamel::ProducerToken>(all[i]->inbox.cancels());
    shards[i].returned = std::make_unique<moodycamel::ProducerToken>(all[i]->inbox.returned());
    if (!shards[i].transfer->valid() || !shards[i].cancel->valid() || !shards[i].returned->valid()) {
      throw std::bad_alloc();
    }
  }
}

ProducerState* ProducerRegistry::enroll() noexcept {
  try {
    std::lock_guard lock(mutex_);
    const std::thread::id me = std::this_thread::get_id();
    const std::uint64_t serial = thread_serial();
    ProducerState* state = nullptr;
    for (auto& s : states_) {
      if (s->owner == me) state = s.get();
    }
    if (state == nullptr) {
      states_.push_back(std::make_unique<ProducerState>(me, shards_));
      state = states_.back().get();
    } else if (state->serial != serial) {
      // A new thread with an exited thread's id takes over its tokens and cached nodes, and is
      // dealt a home shard of its own when it first needs one, as any new thread is.
      state->home = ProducerState::kNoHome;
    }
    state->serial = serial;
    t_producer_states[t_next_victim++ % t_producer_states.size()] = ProducerTlsEntry{uid_, state};
    return state;
  } catch (...) {
    return nullptr;  // out of memory on a thread's first use: its schedule fails with out_of_memory
  }
}

void ProducerRegistry::drop_tokens() noexcept {
  std::lock_guard lock(mutex_);
  for (auto& state : states_) {
    for (ProducerState::PerShard& mine : state->shards) {
      mine.transfer.reset();
      mine.cancel.reset();
      mine.returned.reset();
    }
  }
}

}  // namespace tickwheel::detail
