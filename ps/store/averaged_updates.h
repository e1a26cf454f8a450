// AveragedUpdates: async "avg" and "fresh", pushes held and applied k at a
// time as the mean of what they carried.
#ifndef SPOTPS_PS_STORE_AVERAGED_UPDATES_H_
#define SPOTPS_PS_STORE_AVERAGED_UPDATES_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "ps/store/apply_on_arrival.h"
#include "ps/store/push_average.h"

namespace spotps {

// Owns the held pushes (a PushAverage) and the count of averaged updates.
// Promises: a held push joins exactly one averaged update; updates are
// applied whole and in the order of their numbers; k is
// staleness.average_pushes, or the live workers when that is 0.
class AveragedUpdates : public ApplyOnArrival {
 public:
  using ApplyOnArrival::ApplyOnArrival;

  void DropHeld(std::vector<std::string>* ids) const override;
  void FillStats(v1::StatsResponse* stats) const override;
  bool ApplyHeldOlderThan(absl::Duration age) override;
  bool ApplyHeldIfComplete() override;
  bool WaitForAveragedUpdate(uint64_t update, absl::Time deadline) const override;
  size_t held_pushes() const override;

 protected:
  PushOutcome Admit(absl::string_view push_id, v1::DType dtype,
                    const std::vector<PayloadRange>& ranges, float scale) override
      ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  // The factor an update holding `count` of its `k` pushes applies their
  // mean with, and the share of a round its momentum steps by: 1 here
  // (LocalRounds, local_rounds.h, has its own).
  virtual float ShareOfK(uint32_t count, size_t k) const;

 private:
  // How many held pushes make an averaged update.
  size_t Target() const;
  // Takes the held pushes, if `ready` says so of them, and applies them as
  // the next averaged update; false if there was nothing to apply.
  bool ApplyHeld(const std::function<bool(const PushAverage&)>& ready)
      ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  void ApplyAverage(PushAverage::Batch batch) ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);

  // apply_mu_ (taken before held_mu_) keeps averaged updates whole and in
  // order: each is taken and applied before the next is taken.
  absl::Mutex apply_mu_;
  mutable absl::Mutex held_mu_;
  std::unique_ptr<PushAverage> held_ ABSL_GUARDED_BY(held_mu_);
  uint64_t taken_ ABSL_GUARDED_BY(held_mu_) = 0;
  uint64_t applied_ ABSL_GUARDED_BY(held_mu_) = 0;
  // Updates ApplyHeldOlderThan took short of Target() (Stats reports them).
  std::atomic<uint64_t> waited_out_{0};
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_AVERAGED_UPDATES_H_
