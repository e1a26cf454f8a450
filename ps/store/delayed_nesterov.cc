#include "ps/store/delayed_nesterov.h"

namespace spotps {

PushOutcome DelayedNesterov::Admit(absl::string_view, v1::DType dtype,
                                   const std::vector<PayloadRange>& ranges, float scale,
                                   const PushSender&) {
  // One read of k serves the share and the momentum's cadence.
  const size_t k = target_.live_workers_or_one();
  return ApplyNow(dtype, ranges, scale / static_cast<float>(k), k);
}

}  // namespace spotps
