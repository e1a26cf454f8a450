#include "ps/store/sync_rounds.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spotps {

SyncRounds::SyncRounds(size_t max_round_contributions, UpdateTarget& target)
    : max_round_contributions_(max_round_contributions),
      target_(target),
      held_(max_round_contributions) {}

absl::StatusOr<PushOutcome> SyncRounds::Take(absl::string_view push_id, v1::DType dtype,
                                             const std::vector<PayloadRange>& ranges, float scale,
                                             const PushSender& /*sender*/) {
  RoundBuffer::Gradient copy = RoundBuffer::Copy(dtype, ranges, scale);  // Before locking.
  absl::MutexLock lock(&mu_);
  if (absl::Status s = target_.CheckBaseVersions(ranges, /*current_only=*/true); !s.ok()) return s;
  absl::StatusOr<bool> added = held_.Add(push_id, std::move(copy));
  if (!added.ok()) return added.status();
  PushOutcome outcome;
  outcome.duplicate = !*added;
  outcome.deferred = true;
  outcome.global_step = target_.global_step();
  if (outcome.duplicate) target_.CountDuplicate();
  for (uint32_t id : target_.owned_partitions()) {
    outcome.partition_ids.push_back(id);
    outcome.new_versions.push_back(target_.CurrentVersion(id));
    outcome.staleness.push_back(0);
  }
  return outcome;
}

void SyncRounds::WhileNoUpdate(const std::function<void()>& copy) {
  // A round changes every partition: wait for one in progress.
  absl::MutexLock lock(&mu_);
  copy();
}

void SyncRounds::FillStats(v1::StatsResponse* stats) const {
  absl::MutexLock lock(&mu_);
  stats->set_round_contributions(held_.size());
}

absl::StatusOr<std::vector<std::string>> SyncRounds::SortedRound(
    const std::vector<std::string>& push_ids) const {
  if (push_ids.empty() || push_ids.size() > max_round_contributions_) {
    return absl::InvalidArgumentError(absl::StrFormat("a round names 1 to %d pushes, got %d",
                                                      max_round_contributions_, push_ids.size()));
  }
  std::vector<std::string> sorted = push_ids;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].empty() || sorted[i].size() > kMaxPushIdLength) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "push ids have 1 to %d bytes, got one of %d", kMaxPushIdLength, sorted[i].size()));
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the round names push '", sorted[i], "' twice"));
    }
  }
  return sorted;
}

absl::StatusOr<RoundOutcome> SyncRounds::ApplyRound(const std::vector<std::string>& push_ids) {
  absl::StatusOr<std::vector<std::string>> sorted = SortedRound(push_ids);
  if (!sorted.ok()) return sorted.status();
  absl::MutexLock lock(&mu_);
  RoundOutcome outcome;
  if (*sorted == last_round_) {
    outcome.already_applied = true;
    outcome.global_step = target_.global_step();
    return outcome;
  }
  for (const std::string& id : *sorted) {
    if (!held_.Holds(id)) {
      return absl::NotFoundError(absl::StrCat(
          "push '", id, "' is not held by this shard (lost in a restart, or never sent here)"));
    }
  }
  const uint64_t step = target_.BeginUpdate();
  // Every gradient was computed on the current versions: no staleness rule.
  StalenessStep plain;
  plain.lr = static_cast<float>(target_.LearningRateAt(step));
  auto plan = [&plain](uint64_t) { return plain; };
  const std::vector<uint32_t>& ids = target_.owned_partitions();
  std::vector<std::vector<float>> means(target_.apply_lanes());
  // The lanes run while this thread holds mu_ and waits for them.
  target_.ForEachPartition(ids.size(), [&](size_t i, size_t lane) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<float>& mean = means[lane];
    mean.resize(target_.partition_map().partitions()[ids[i]].num_elements);
    held_.MeanInto(*sorted, ids[i], static_cast<int64_t>(mean.size()), mean.data());
    const GradientRun whole{0, static_cast<int64_t>(mean.size()),
                            GradientView{v1::DTYPE_FP32, mean.data()}};
    target_.UpdatePartition(ids[i], target_.CurrentVersion(ids[i]), {whole}, plan);
  });
  target_.CountApplied(sorted->size());
  held_.Clear();
  last_round_ = *std::move(sorted);
  outcome.global_step = step + 1;
  return outcome;
}

}  // namespace spotps
