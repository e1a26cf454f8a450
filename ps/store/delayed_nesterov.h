// DelayedNesterov: local:H's asynchronous policy (--staleness_method=
// delayed), each pseudo-gradient applied as it arrives, the outer momentum
// stepped once per k of them.
#ifndef SPOTPS_PS_STORE_DELAYED_NESTEROV_H_
#define SPOTPS_PS_STORE_DELAYED_NESTEROV_H_

#include <cstdint>

#include "ps/store/apply_on_arrival.h"

namespace spotps {

// Holds no state of its own: the deferred sum is optimizer state, and the
// update count (the global step) says when the momentum steps, so both
// survive a checkpoint. Promises: a push is applied on arrival as its 1/k
// share (k = live workers), with plain SGD at the outer lr; each update
// whose count is a multiple of k also steps the Nesterov momentum with the
// sum of the shares since its last step, so that k pushes on the same
// weights move them exactly as one Nesterov step on their mean
// (LocalRounds' update). Nobody waits for a slower trainer, and no push is
// counted in the momentum twice or left out of it for more than k updates.
class DelayedNesterov : public ApplyOnArrival {
 public:
  using ApplyOnArrival::ApplyOnArrival;

 protected:
  PushOutcome Admit(absl::string_view push_id, v1::DType dtype,
                    const std::vector<PayloadRange>& ranges, float scale,
                    const PushSender& sender) override ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_DELAYED_NESTEROV_H_
