// SyncRounds: sync mode's policy, whole gradients held until shard 0 closes
// the round and every shard applies their mean as one update.
#ifndef SPOTPS_PS_STORE_SYNC_ROUNDS_H_
#define SPOTPS_PS_STORE_SYNC_ROUNDS_H_

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "ps/store/round_buffer.h"
#include "ps/store/update_policy.h"

namespace spotps {

// Owns the open round's pushes and the ids of the last round applied.
// Promises: versions move only by whole rounds, under this policy's lock,
// so a held push's base versions stay current until the round that drops
// it; a retried ApplyRound of the last round changes nothing.
class SyncRounds : public UpdatePolicy {
 public:
  SyncRounds(size_t max_round_contributions, UpdateTarget& target);

  // Holds a gradient of the current versions for the open round (ABORTED
  // if it was computed before the last round was applied).
  absl::StatusOr<PushOutcome> Take(absl::string_view push_id, v1::DType dtype,
                                   const std::vector<PayloadRange>& ranges, float scale,
                                   const PushSender& sender) override;
  void WhileNoUpdate(const std::function<void()>& copy) override;
  void FillStats(v1::StatsResponse* stats) const override;
  absl::StatusOr<RoundOutcome> ApplyRound(const std::vector<std::string>& push_ids) override;

 private:
  // push_ids sorted, if they are a well-formed round; INVALID_ARGUMENT if not.
  absl::StatusOr<std::vector<std::string>> SortedRound(
      const std::vector<std::string>& push_ids) const;

  const size_t max_round_contributions_;
  UpdateTarget& target_;
  mutable absl::Mutex mu_;
  RoundBuffer held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> last_round_ ABSL_GUARDED_BY(mu_);  // Sorted push ids.
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_SYNC_ROUNDS_H_
