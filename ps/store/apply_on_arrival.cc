#include "ps/store/apply_on_arrival.h"

#include "common/tensor_codec.h"

namespace spotps {

ApplyOnArrival::ApplyOnArrival(const StalenessConfig& staleness, const OptimizerConfig& optimizer,
                               UpdateTarget& target)
    : staleness_(staleness), optimizer_(optimizer), target_(target) {}

absl::StatusOr<PushOutcome> ApplyOnArrival::Take(absl::string_view push_id, v1::DType dtype,
                                                 const std::vector<PayloadRange>& ranges,
                                                 float scale, const PushSender& sender) {
  auto duplicate = [&]() ABSL_SHARED_LOCKS_REQUIRED(whole_push_mu_) {
    target_.CountDuplicate();
    return AdmitDuplicate(sender);
  };
  absl::ReaderMutexLock whole_push(&whole_push_mu_);
  RecentPushIds& ids = target_.recent_push_ids();
  // The id first: a retry of a push that was applied is a duplicate, even
  // if the partitions have moved on too far for its base versions since.
  if (ids.Contains(push_id)) return duplicate();
  if (absl::Status s = target_.CheckBaseVersions(ranges, /*current_only=*/false); !s.ok()) {
    return s;
  }
  if (!ids.Insert(push_id)) return duplicate();  // A racing twin.
  return Admit(push_id, dtype, ranges, scale, sender);
}

PushOutcome ApplyOnArrival::AdmitDuplicate(const PushSender&) {
  PushOutcome outcome;
  outcome.duplicate = true;
  outcome.global_step = target_.global_step();
  return outcome;
}

void ApplyOnArrival::WhileNoUpdate(const std::function<void()>& copy) {
  absl::MutexLock no_push_in_flight(&whole_push_mu_);
  copy();
}

PushOutcome ApplyOnArrival::Admit(absl::string_view, v1::DType dtype,
                                  const std::vector<PayloadRange>& ranges, float scale,
                                  const PushSender&) {
  return ApplyNow(dtype, ranges, scale);
}

StalenessStep ApplyOnArrival::Plan(double lr, uint64_t staleness, uint64_t step) const {
  // AdamW's beta1 or SGD's momentum, as configured.
  const float momentum =
      optimizer_.kind == OptimizerKind::kAdamW ? optimizer_.beta1 : optimizer_.momentum;
  return PlanStalenessStep(staleness_, lr, momentum, target_.View(staleness, step));
}

namespace {

// Any k consecutive updates hold a multiple of k, so when k changes the
// deferred sum still waits at most k updates.
MomentumPhase PhaseAt(uint64_t step, size_t defer_momentum_k) {
  if (defer_momentum_k == 0) return MomentumPhase::kEveryUpdate;
  return (step + 1) % defer_momentum_k == 0 ? MomentumPhase::kApplyDeferred : MomentumPhase::kDefer;
}

}  // namespace

PushOutcome ApplyOnArrival::ApplyNow(v1::DType dtype, const std::vector<PayloadRange>& ranges,
                                     float scale, size_t defer_momentum_k) {
  const uint64_t step = target_.BeginUpdate();
  const double lr = target_.LearningRateAt(step);
  const size_t width = WireBytesPerElement(dtype);
  const MomentumPhase phase = PhaseAt(step, defer_momentum_k);
  auto plan = [&](uint64_t staleness) {
    StalenessStep how = Plan(lr, staleness, step);
    how.momentum_phase = phase;
    return how;
  };
  PushOutcome outcome;
  outcome.global_step = step + 1;
  const RangesByPartition by_partition = GroupByPartition(ranges);
  std::vector<const RangesByPartition::value_type*> groups;
  for (const auto& entry : by_partition) groups.push_back(&entry);
  std::vector<PartitionUpdate> updates(groups.size());
  target_.ForEachPartition(groups.size(), [&](size_t i, size_t) {
    const auto& [id, group] = *groups[i];
    std::vector<GradientRun> runs;
    for (const PayloadRange* r : group) {
      runs.push_back(GradientRun{static_cast<int64_t>(r->offset),
                                 static_cast<int64_t>(r->bytes.size() / width),
                                 GradientView{dtype, r->bytes.data(), scale}});
    }
    updates[i] = target_.UpdatePartition(id, group.front()->version, runs, plan);
  });
  for (size_t i = 0; i < groups.size(); ++i) {
    outcome.partition_ids.push_back(groups[i]->first);
    outcome.new_versions.push_back(updates[i].version);
    outcome.staleness.push_back(updates[i].staleness);
    target_.ObserveStaleness(updates[i].staleness);
  }
  target_.CountApplied(1);
  return outcome;
}

}  // namespace spotps
