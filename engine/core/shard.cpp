// engine/core/shard.cpp — a shard's pass and what it takes in (cancels, moves, returned nodes,
// clears, hand-offs), and the calls its own thread makes into its wheel. Its parts are in files of
// their own (shard.hpp lists them).
#include "core/shard.hpp"

#include <limits>

namespace tickwheel::detail {
namespace {

Wakeup::Kind wakeup_kind(const EngineOptions& opts) noexcept {
  if (opts.threads == Threads::workers) return Wakeup::Kind::futex;
  return opts.wake_loop ? Wakeup::Kind::callback : Wakeup::Kind::eventfd;
}

}  // namespace

Shard::Shard(ShardHost& host, std::size_t index, unsigned cpu, const EngineOptions& opts, Nanos start)
    : host_(host),
      index_(index),
      transfer_cap_(opts.transfer_cap),
      manual_(opts.threads == Threads::manual),
      own_clock_(opts.clock != nullptr),
      on_pass_(opts.on_pass),
      on_pass_context_(opts.on_pass_context),
      ticks_(static_cast<std::uint64_t>(opts.tick.count())),
      wheel_(WheelOptions{.tick = opts.tick, .start = start, .max_pending = 0},
             ShardPolicy{.claims = &counters.claimed, .shard = this}, arena_.id),
      reserve(wheel_, inbox, host, index, opts),
      admission(opts.max_pending_per_shard, counters.claimed),
      tasks(*this, host, inbox, counters, opts),
      worker(*this, cpu, opts),
      inbox(wakeup_kind(opts), index, &opts.wake_loop, static_cast<std::uint64_t>(opts.tick.count())),
      loop(*this) {
  lane_.shard = this;
  lane_.index = index;
  lane_.pool = &wheel_.pool();
}

void aim_own_lane() noexcept {
  Shard* const own = t_current_shard != nullptr ? t_current_shard : t_owned_shard;
  t_own_lane = own != nullptr ? &own->lane_ : nullptr;
}

ShardStats Shard::stats(std::uint64_t claimed_elsewhere) const {
  ShardStats s;
  counters.read(s, claimed_elsewhere);
  s.rejected = admission.rejected();
  s.queue_depth = inbox.queue_depth();
  worker.read(s);
  return s;
}

void Shard::request_stop() noexcept {
  // seq_cst, and seq_cst on the loop's polling flag here and in its poll(): a poll that takes the
  // flag then reads stopping_, so either it sees stopping_ and runs nothing, or the wait below
  // sees it polling and waits for it to end. (For a worker, any order would do: it reads
  // stopping_ each pass.)
  stopping_.store(true, std::memory_order_seq_cst);
  inbox.wake().signal();  // a worker, or an owner's loop asleep in its wait: its next poll() lets go
  if (manual_) loop.wait_out_driver();
}

void Shard::prepare() noexcept {
  reserve.prepare();
  worker.mark_ready();
}

void Shard::retire_owner_cancel(Node* node) noexcept {
  admission.free_place();
  // Release: pairs with EngineCore::pending()'s acquire, as a producer's cancel count. Only the
  // shard's thread (its owner, one at a time) writes it.
  bump(counters.own_cancels, 1, std::memory_order_release);
  // A hand-off not taken in yet (scheduled from another thread, or before this thread owned the
  // shard) is not linked: adopt() finds it cancelled and recycles it, as for any cancel in transit.
  if (node->pprev == nullptr) return;
  wheel_.cancel_own(node);
}

std::size_t Shard::pass(Nanos now, std::size_t limit) noexcept {
  loop_now_ = std::max(loop_now_, now);
  // A load and a store, not an increment: this thread is the only writer (as every counter here).
  bump(counters.passes);
  const std::optional<Nanos> planned = planned_ns_;
  const std::uint64_t moves_before = on_pass_ != nullptr ? wheel_.stats().moved : 0;
  if (planned_ns_ && now > *planned_ns_) counters.note_lag((now - *planned_ns_).count());
  // Netty's order: cancels first (their nodes must not be transferred into the wheel as live
  // timers only to be unlinked again), then at most transfer_cap hand-offs, then what is due.
  const std::size_t cancels = drain_cancels();
  (void)drain_moves();  // before anything runs, as the cancels
  drain_returned();
  (void)serve_clears();  // after the periodic timers back from the executor are linked again
  const std::size_t moved = inbox.take_handoffs(transfer_cap_, [this](Node* node) { wheel_.adopt(node); });
  cap_hit_ = moved == transfer_cap_ && inbox.queue_depth() != 0;
  if (cap_hit_) bump(counters.cap_hits);
  const std::uint64_t fired_before = wheel_.stats().fired;
  auto ran = [&] { return static_cast<std::size_t>(wheel_.stats().fired - fired_before); };
  for (;;) {
    try {
      wheel_.advance(now, limit - ran());
      break;
    } catch (...) {
      // The callback counts as fired; the wheel resumes the rest of the pass on the next call.
      tasks.callback_threw();
    }
  }
  reserve.refill();
  publish_stats();
  if (on_pass_ != nullptr) [[unlikely]] {
    const PassReport report{.shard = index_,
                            .planned = planned,
                            .start = now,
                            .end = clock_now(),
                            .cancels = cancels,
                            .transferred = moved,
                            .fired = ran(),
                            .moved = wheel_.stats().moved - moves_before};
    on_pass_(on_pass_context_, report);
  }
  return ran();
}

std::size_t Shard::drain_cancels() noexcept {
  return inbox.drain_cancels([this](const CancelRecord& r) { wheel_.retire(r.node, r.gen); });
}

std::size_t Shard::drain_moves() noexcept {
  // A stale record (the timer fired, ran, was cancelled or its node reused) is dropped.
  return inbox.drain_moves([this](const MoveRecord& r) { (void)move_here(r.node, r.gen, r.deadline_ns); });
}

void Shard::drain_returned() noexcept {
  inbox.drain_returned([this](Node* node) {
    if (callable_meta(node) == 0) {
      wheel_.release_node(node);  // a one-shot run destroyed its callable
    } else {
      wheel_.rearm_returned(node);
    }
  });
}

bool Shard::serve_clears() noexcept {
  if (!inbox.clear_requested()) [[likely]] {
    return false;
  }
  (void)clear_here();
  return true;
}

void Shard::settle() noexcept {
  drain_cancels();
  drain_moves();
  (void)inbox.take_all_handoffs([this](Node* node) { wheel_.adopt(node); });
}

void Shard::drain_stopped() noexcept {
  drain_cancels();
  drain_moves();
  drain_returned();
  while (inbox.take_handoffs(std::numeric_limits<std::size_t>::max(),
                             [this](Node* node) { wheel_.adopt(node); }) != 0) {
  }
  (void)serve_clears();
  publish_stats();
}

bool Shard::move_here(Node* node, std::uint32_t pending_gen, std::uint64_t deadline_ns) noexcept {
  // Acquire: pairs with a canceller's compare-and-swap, so that a cancel seen is seen whole; one
  // that comes after this load leaves the node linked, where its record or the fire path finds it.
  if (node->gen.load(std::memory_order_acquire) != pending_gen) return false;
  const std::uint64_t due = ticks_.due(Nanos(static_cast<Nanos::rep>(deadline_ns)));
  // The owner outside a pass may queue it, as the standalone wheel does; a pass, a walk's aftermath
  // or a posted record moves it at once.
  if (owned_here_outside_pass()) {
    wheel_.move_own(node, due);
    if (loop_waits_) [[unlikely]] {
      inbox.wake_self_for(due);
    }
  } else {
    wheel_.move(node, due);
  }
  return true;
}

std::size_t Shard::clear_here() noexcept {
  settle();
  const std::size_t cleared = wheel_.cancel_all();
  admission.free_place(cleared);
  // Release: pairs with cleared()'s acquire, as direct_ does. Only this thread writes it.
  bump(counters.cleared, cleared, std::memory_order_release);
  // Relaxed: a count for stats(), ordering nothing. Only this thread writes it.
  bump(counters.clears);
  publish_stats();
  return cleared;
}

}  // namespace tickwheel::detail
