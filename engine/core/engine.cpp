// engine/core/engine.cpp — the public facade: Engine's members forward to EngineCore
// (engine_core.cpp); Timer's are one compare-and-swap or one load on the node's generation word.
#include "tickwheel/engine.hpp"

#include <algorithm>

#include "core/engine_core.hpp"

namespace tickwheel {

// ---- Engine ----

Engine::Engine(EngineOptions opts) : core_(std::make_unique<detail::EngineCore>(std::move(opts))) {}
Engine::~Engine() = default;

detail::Reservation Engine::acquire(std::size_t shard) noexcept { return core_->acquire(shard); }

std::uint32_t Engine::link_own(detail::Node* node, detail::Shard* shard, Nanos when, bool relative) noexcept {
  return detail::EngineCore::link_own(node, shard, when, relative);
}

Timer Engine::commit(detail::Node* node, detail::Shard* shard, detail::ProducerState* producer, Nanos when,
                     bool relative) noexcept {
  return core_->commit(node, shard, producer, when, relative);
}

void Engine::held_destructors() noexcept { core_->note_destructors(); }

void Engine::start() { core_->start(); }
std::vector<Timer> Engine::stop() {
  std::vector<Timer> timers;
  const detail::EngineCore::HandBack back{
      .context = &timers,
      .reserve = [](void* context,
                    std::size_t most) { static_cast<std::vector<Timer>*>(context)->reserve(most); },
      // Within the capacity reserved above: push_back does not allocate, so it cannot throw.
      .each = [](void* context,
                 Timer timer) noexcept { static_cast<std::vector<Timer>*>(context)->push_back(timer); },
  };
  core_->shut_down(&back);
  return timers;
}

std::size_t Engine::stop_visiting(void* context, void (*each)(void* context, Timer timer) noexcept) {
  const detail::EngineCore::HandBack back{
      .context = context, .reserve = [](void* /*context*/, std::size_t /*most*/) {}, .each = each};
  return core_->shut_down(&back);
}
EngineStats Engine::stats() const { return core_->stats(); }
Timer Engine::timer_from_raw(std::uint64_t raw) const noexcept { return core_->timer_from_raw(raw); }
std::size_t Engine::clear(std::size_t shard) { return core_->clear(shard); }
bool Engine::post_clear(std::size_t shard) { return core_->post_clear(shard); }
bool Engine::post_clear_all() noexcept { return core_->post_clear_all(); }
std::size_t Engine::walk_shard(std::size_t shard, void* context,
                               void (*each)(void* context, Timer timer, Nanos deadline)) {
  return core_->for_each_pending(shard, context, each);
}
std::size_t Engine::shard_count() const noexcept { return core_->shard_count(); }
std::size_t Engine::poll(std::size_t shard, std::size_t limit) {
  return core_->poll(shard, core_->now(), limit);
}
std::size_t Engine::poll(std::size_t shard, Nanos now, std::size_t limit) {
  return core_->poll(shard, now, limit);
}
std::optional<Nanos> Engine::next_deadline(std::size_t shard) const { return core_->next_deadline(shard); }
bool Engine::prepare_wait(std::size_t shard, std::optional<Nanos> until) {
  return core_->prepare_wait(shard, until);
}
void Engine::finish_wait(std::size_t shard) { core_->finish_wait(shard); }
int Engine::wakeup_fd(std::size_t shard) const { return core_->wakeup_fd(shard); }
void Engine::own_shard(std::size_t shard) { core_->own_shard(shard); }
void Engine::clock_moved() noexcept { core_->clock_moved(); }
void Engine::release_shard(std::size_t shard) { core_->release_shard(shard); }

std::optional<std::size_t> Engine::owned_shard() const noexcept { return core_->owned_shard_index(); }

bool Engine::stopped() const noexcept { return core_->stopped(); }
std::uint64_t Engine::periodic_meta(Nanos period, const PeriodicOptions& opts) const noexcept {
  return detail::periodic_meta(period, opts, core_->tick());
}
Nanos Engine::tick() const noexcept { return core_->tick(); }
Nanos Engine::now() const noexcept { return core_->now(); }

// ---- Timer ----

bool Timer::cancel() noexcept {
  if (node_ == nullptr) return false;
  const std::uint32_t cancelled = detail::in_state(gen_, detail::kCancelled);
  const std::uint32_t running = detail::in_state(gen_, detail::kRunning);  // periodic only
  std::uint32_t expected = gen_;
  for (;;) {
    // acq_rel: pairs with the worker's claim (ShardPolicy::claim) and, for a periodic timer, its
    // re-arm (ShardPolicy::rearm) on the same word: exactly one of two racing compare-and-swaps succeeds, and
    // the loser sees the winner's state.
    if (node_->gen.compare_exchange_strong(expected, cancelled, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      // The shard's owner, outside a pass of it: retired here and now (EngineCore::on_cancel's
      // first case, without the call through the host).
      if (expected == gen_ && shard_->owned_here_outside_pass()) {
        shard_->retire_owner_cancel(node_);
        return true;
      }
      // From running, there is nothing to unlink: the re-arm, refused, recycles the node.
      shard_->host().on_cancel(*shard_, node_, cancelled, /*linked=*/expected == gen_);
      return true;
    }
    // A one-shot timer claimed, cancelled before, or reused: lost. A periodic timer running: try
    // running -> cancelled. Re-armed meanwhile (back to pending): try pending -> cancelled again.
    if (expected != gen_ && expected != running) return false;
  }
}

bool Timer::cancelled() const noexcept {
  // Acquire: pairs with the winning compare-and-swap.
  return node_ != nullptr &&
         node_->gen.load(std::memory_order_acquire) == detail::in_state(gen_, detail::kCancelled);
}

bool Timer::is_pending() const noexcept {
  if (node_ == nullptr) return false;
  // Acquire: as cancelled(), pairs with the compare-and-swap that moved the word on.
  const std::uint32_t gen = node_->gen.load(std::memory_order_acquire);
  return gen == gen_ || gen == detail::in_state(gen_, detail::kRunning);
}

bool Timer::expired() const noexcept {
  return node_ != nullptr &&
         node_->gen.load(std::memory_order_acquire) == detail::in_state(gen_, detail::kFired);
}

Moved Timer::reschedule(Nanos deadline) noexcept { return move_to(deadline, /*relative=*/false); }
Moved Timer::reschedule_after(Nanos delay) noexcept { return move_to(delay, /*relative=*/true); }

Moved Timer::move_to(Nanos when, bool relative) noexcept {
  if (shard_ == nullptr) return Moved(Moved::Outcome::refused);
  // The shard's own thread moves it itself, without the call through the host.
  if (shard_->can_move_at_once()) return shard_->reschedule_here(node_, gen_, when, relative);
  return shard_->host().reschedule(*shard_, node_, gen_, when, relative);
}

std::optional<Nanos> Timer::deadline() const noexcept { return detail::EngineCore::deadline(*this); }

std::optional<Nanos> Timer::remaining() const noexcept {
  const std::optional<Nanos> at = deadline();
  if (!at) return std::nullopt;
  // Both are in [0, Nanos::max()]: no overflow.
  return std::max(*at - shard_->host().now(), Nanos(0));
}

std::uint64_t Timer::raw() const noexcept {
  if (node_ == nullptr) return 0;
  // The locator was written once, before the node was first handed out, and never again: whatever
  // gave this thread the Timer ordered that write before this read.
  const std::uint32_t locator = node_->index;
  if (locator == detail::NodeDirectory::kNoLocator) return 0;
  return (std::uint64_t{gen_} << 32) | locator;
}

std::size_t Timer::shard() const noexcept { return shard_ != nullptr ? shard_->index() : 0; }

}  // namespace tickwheel
