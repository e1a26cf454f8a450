// ApplyOnArrival: async mode's policy, each push applied as it arrives with
// the staleness method's step (none, lr, dc, momentum).
#ifndef SPOTPS_PS_STORE_APPLY_ON_ARRIVAL_H_
#define SPOTPS_PS_STORE_APPLY_ON_ARRIVAL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "ps/store/update_policy.h"

namespace spotps {

// Owns the lock that keeps pushes whole against a checkpoint. Promises: a
// push id is taken at most once among the store's recent ids (a retry, or
// a racing twin, is a duplicate); each push is one update of the
// partitions it carries, one partition at a time.
class ApplyOnArrival : public UpdatePolicy {
 public:
  ApplyOnArrival(const StalenessConfig& staleness, const OptimizerConfig& optimizer,
                 UpdateTarget& target);

  absl::StatusOr<PushOutcome> Take(absl::string_view push_id, v1::DType dtype,
                                   const std::vector<PayloadRange>& ranges, float scale,
                                   const PushSender& sender) override;
  void WhileNoUpdate(const std::function<void()>& copy) override;

 protected:
  // A new push, its id recorded and its versions checked: apply it now.
  // AveragedUpdates holds it instead.
  virtual PushOutcome Admit(absl::string_view push_id, v1::DType dtype,
                            const std::vector<PayloadRange>& ranges, float scale,
                            const PushSender& sender) ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  // A push whose id was taken before (a retry, or a unit trained again
  // after its trainer died having pushed it): changes nothing here.
  // AveragedUpdates may count its sender toward the open update.
  virtual PushOutcome AdmitDuplicate(const PushSender& sender)
      ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  // Applies one push as one update, each partition with the staleness
  // method's step for its own staleness. With `defer_momentum_k` > 0
  // (DelayedNesterov) SGD's momentum steps only on updates whose count is
  // a multiple of it, deferring the others; 0 steps it every update.
  PushOutcome ApplyNow(v1::DType dtype, const std::vector<PayloadRange>& ranges, float scale,
                       size_t defer_momentum_k = 0);
  // The step for an update of `staleness` at global step `step`, lr `lr`.
  StalenessStep Plan(double lr, uint64_t staleness, uint64_t step) const;

  const StalenessConfig staleness_;
  const OptimizerConfig optimizer_;
  UpdateTarget& target_;
  // Pushes hold it shared from the id lookup to their last partition;
  // WhileNoUpdate holds it exclusively, so a checkpoint holds whole pushes
  // only, and exactly the ids of those.
  mutable absl::Mutex whole_push_mu_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_APPLY_ON_ARRIVAL_H_
