#include "ps/store/update_policy.h"

#include "ps/store/apply_on_arrival.h"
#include "ps/store/averaged_updates.h"
#include "ps/store/delayed_nesterov.h"
#include "ps/store/local_rounds.h"
#include "ps/store/sync_rounds.h"

namespace spotps {

bool UpdatePolicy::WaitForAveragedUpdate(uint64_t update, absl::Time) const {
  return update == 0;  // No averaged updates here: only "none of them" is ever reached.
}

absl::StatusOr<RoundOutcome> UpdatePolicy::ApplyRound(const std::vector<std::string>&) {
  return absl::FailedPreconditionError(
      "this shard does not run --consistency=sync: it applies every push on arrival");
}

std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const UpdatePolicyConfig& config,
                                               UpdateTarget& target) {
  if (config.sync_rounds) {
    return std::make_unique<SyncRounds>(config.max_round_contributions, target);
  }
  if (config.staleness.delayed_nesterov) {
    return std::make_unique<DelayedNesterov>(config.staleness, config.optimizer, target);
  }
  if (config.staleness.average && config.staleness.share_of_k) {
    return std::make_unique<LocalRounds>(config.staleness, config.optimizer, target);
  }
  if (config.staleness.average) {
    return std::make_unique<AveragedUpdates>(config.staleness, config.optimizer, target);
  }
  return std::make_unique<ApplyOnArrival>(config.staleness, config.optimizer, target);
}

}  // namespace spotps
