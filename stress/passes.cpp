// stress/passes.cpp — the on_pass hook's recording: one pass into its shard's histograms.
#include "passes.hpp"

namespace tickwheel::stress {

void PassRecorder::record(const PassReport& pass) noexcept {
  passes.add(1);
  if (!pass.planned) {
    unplanned.add(1);
  } else if (pass.start < *pass.planned) {
    early.add(1);
  } else {
    tick_lag.record(static_cast<std::uint64_t>((pass.start - *pass.planned).count()));
  }
  // The engine's clock never goes back, so end >= start; a clock of the user's that did would
  // record 0 rather than wrap.
  const std::int64_t took = (pass.end - pass.start).count();
  duration.record(took > 0 ? static_cast<std::uint64_t>(took) : 0);
  fired.record(pass.fired);
  moved.record(pass.moved);
  transferred.record(pass.transferred);
  cancels.record(pass.cancels);
  fired_total.add(pass.fired);
  moved_total.add(pass.moved);
  transferred_total.add(pass.transferred);
  cancels_total.add(pass.cancels);
}

void PassRecorders::resize(std::size_t shards) {
  recorders_ = std::make_unique<PassRecorder[]>(shards);
  count_ = shards;
}

void PassRecorders::on_pass(void* context, const PassReport& pass) noexcept {
  auto* self = static_cast<PassRecorders*>(context);
  if (pass.shard < self->count_) self->recorders_[pass.shard].record(pass);
}

}  // namespace tickwheel::stress
