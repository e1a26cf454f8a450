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
//
// Under "fresh" with k = the live workers, a new worker's first push joins
// the open update only if that one holds no push yet; otherwise it waits
// for the next one, and the open update's k leaves it out. Why: that push
// reaches each shard at a different moment (a trainer pushes to each shard
// as its part of the backward pass is done). Joined to whichever update is
// open, it could close the update on one shard and open the next on
// another, and "fresh" trainers, which wait for their push's update on
// every shard, would then each wait for the other's next push until
// average_wait_ms ran out. Held for the update after the open one, it
// lands in the same one everywhere: the open update is either still
// filling (on every shard, since trainers push only after the last one
// was applied everywhere) or already taken.
//
// A duplicate push (most often a unit trained again after its trainer
// died having pushed it) stands in for its worker's push in the update it
// would have joined: that gradient is in the weights already, and without
// it the update would wait out average_wait_ms for this worker.
//
// In local rounds, an update that a new worker's first push opens waits
// longer, for the others' rounds to end (AveragingWaits says why).
//
// An update is complete when it holds k pushes of workers still counted.
// A worker that stops counting (a trainer killed while its push waits for
// its update) leaves its held push in the update but no longer counts it,
// so the update still waits for every remaining worker's push. Counting it
// would close the update one live push early, on the shards that hold it
// and not on one that lost it, and the rounds would run out of phase as
// above.
class AveragedUpdates : public ApplyOnArrival {
 public:
  using ApplyOnArrival::ApplyOnArrival;

  void DropHeld(std::vector<std::string>* ids) const override;
  void FillStats(v1::StatsResponse* stats) const override;
  bool ApplyHeldOlderThan(const AveragingWaits& waits) override;
  bool ApplyHeldIfComplete() override;
  void StopCounting(absl::string_view worker) override;
  bool WaitForAveragedUpdate(uint64_t update, absl::Time deadline) const override;
  size_t held_pushes() const override;

 protected:
  PushOutcome Admit(absl::string_view push_id, v1::DType dtype,
                    const std::vector<PayloadRange>& ranges, float scale,
                    const PushSender& sender) override ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  // The factor an update holding `count` of its `k` pushes applies their
  // mean with, and the share of a round its momentum steps by: 1 here
  // (LocalRounds, local_rounds.h, has its own).
  virtual float ShareOfK(uint32_t count, size_t k) const;
  PushOutcome AdmitDuplicate(const PushSender& sender) override
      ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);

 private:
  // The update being filled, as ApplyHeld's `ready` sees it.
  struct OpenUpdate {
    const PushAverage& held;
    size_t k;          // The pushes that complete it.
    absl::Time since;  // When it began to wait: its oldest push's arrival,
                       // or when the pushes held for it became its own.
    bool opened_by_new_worker;  // Local rounds: AveragingWaits::new_workers_round.
  };

  // How many held pushes make an averaged update, new workers' held for
  // the next one included.
  size_t Target() const;
  // How many make the open one: Target() less those held for the next.
  size_t OpenTarget() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(held_mu_);
  // Whether an update waits for a push of each live worker ("fresh" with
  // k = the live workers, not local rounds): then a new worker's first
  // push may wait for the next update, and a duplicate push stands in.
  bool WaitsForEachWorker() const;
  // Places a contribution of `sender` in the open update, or in the next
  // for a new worker's (above), and applies the open one if that completes
  // it; returns the number of the update it is in. `add` adds it to the
  // update given. With `once_per_worker`, a worker already counted in the
  // open or the next update adds nothing there.
  uint64_t Place(const PushSender& sender, bool once_per_worker,
                 const std::function<void(PushAverage&, absl::Time)>& add)
      ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  // Takes the held pushes, if `ready` says so of them, and applies them as
  // the next averaged update; false if there was nothing to apply.
  bool ApplyHeld(const std::function<bool(const OpenUpdate&)>& ready)
      ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);
  // Applies `batch` as an update that waited for `k` pushes.
  void ApplyAverage(PushAverage::Batch batch, size_t k) ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_);

  // apply_mu_ (taken before held_mu_) keeps averaged updates whole and in
  // order: each is taken and applied before the next is taken.
  absl::Mutex apply_mu_;
  mutable absl::Mutex held_mu_;
  std::unique_ptr<PushAverage> held_ ABSL_GUARDED_BY(held_mu_);
  // New workers' first pushes, held for the update after the open one.
  std::unique_ptr<PushAverage> next_ ABSL_GUARDED_BY(held_mu_);
  // When next_'s pushes last became held_'s.
  absl::Time next_opened_ ABSL_GUARDED_BY(held_mu_) = absl::InfinitePast();
  // Local rounds: held_ was opened by a new worker's first push.
  bool held_opened_by_new_worker_ ABSL_GUARDED_BY(held_mu_) = false;
  uint64_t taken_ ABSL_GUARDED_BY(held_mu_) = 0;
  uint64_t applied_ ABSL_GUARDED_BY(held_mu_) = 0;
  // Updates ApplyHeldOlderThan took short of their k (Stats reports them).
  std::atomic<uint64_t> waited_out_{0};
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_AVERAGED_UPDATES_H_
