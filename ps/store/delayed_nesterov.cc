#include "ps/store/delayed_nesterov.h"

namespace spotps {

size_t DelayedNesterov::LiveWorkers() const {
  const int live = target_.live_workers();
  return live > 0 ? static_cast<size_t>(live) : size_t{1};
}

PushOutcome DelayedNesterov::Admit(absl::string_view, v1::DType dtype,
                                   const std::vector<PayloadRange>& ranges, float scale) {
  return ApplyNow(dtype, ranges, scale / static_cast<float>(LiveWorkers()));
}

MomentumPhase DelayedNesterov::PhaseAt(uint64_t step) const {
  // Any k consecutive updates hold a multiple of k, so when k changes the
  // deferred sum still waits at most k updates.
  return (step + 1) % LiveWorkers() == 0 ? MomentumPhase::kApplyDeferred : MomentumPhase::kDefer;
}

}  // namespace spotps
