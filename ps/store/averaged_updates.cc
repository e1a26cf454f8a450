#include "ps/store/averaged_updates.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace spotps {

size_t AveragedUpdates::Target() const {
  if (staleness_.average_pushes > 0) return static_cast<size_t>(staleness_.average_pushes);
  return target_.live_workers_or_one();
}

size_t AveragedUpdates::OpenTarget() const {
  const size_t k = Target();
  const size_t next = next_ == nullptr ? 0 : next_->counted_pushes();
  return k > next ? k - next : size_t{1};
}

bool AveragedUpdates::WaitsForEachWorker() const {
  // Local rounds end apart anyway and count shares of k (local_rounds.h);
  // a fixed k does not grow with a new worker.
  return staleness_.fresh && !staleness_.share_of_k && staleness_.average_pushes == 0;
}

float AveragedUpdates::ShareOfK(uint32_t, size_t) const { return 1.0f; }

size_t AveragedUpdates::held_pushes() const {
  absl::MutexLock lock(&held_mu_);
  return (held_ == nullptr ? 0 : held_->pushes()) + (next_ == nullptr ? 0 : next_->pushes());
}

void AveragedUpdates::DropHeld(std::vector<std::string>* ids) const {
  absl::MutexLock lock(&held_mu_);
  auto holds = [](const std::unique_ptr<PushAverage>& held, const std::string& id) {
    return held != nullptr && held->Holds(id);
  };
  ids->erase(std::remove_if(ids->begin(), ids->end(),
                            [&](const std::string& id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                              return holds(held_, id) || holds(next_, id);
                            }),
             ids->end());
}

void AveragedUpdates::FillStats(v1::StatsResponse* stats) const {
  stats->set_average_target(static_cast<uint32_t>(Target()));
  stats->set_averaged_updates_waited_out(waited_out_.load());
}

PushOutcome AveragedUpdates::Admit(absl::string_view push_id, v1::DType dtype,
                                   const std::vector<PayloadRange>& ranges, float scale,
                                   const PushSender& sender) {
  // One live worker: nothing to average with, so no detour through the
  // FP32 sums (the transport's hot path when one trainer pushes).
  if (Target() == 1 && held_pushes() == 0) return ApplyNow(dtype, ranges, scale);
  PushOutcome outcome;
  outcome.averaged_later = true;
  for (const auto& [id, group] : GroupByPartition(ranges)) {
    const uint64_t version = target_.CurrentVersion(id);
    const uint64_t staleness = version - group.front()->version;
    target_.ObserveStaleness(staleness);
    outcome.partition_ids.push_back(id);
    outcome.new_versions.push_back(version);
    outcome.staleness.push_back(staleness);
  }
  RoundBuffer::Gradient copy = RoundBuffer::Copy(dtype, ranges, scale);
  outcome.average_update =
      Place(sender, /*once_per_worker=*/false, [&](PushAverage& update, absl::Time now) {
        update.Add(push_id, sender.worker, ranges, std::move(copy), now);
      });
  // Another push may join before the take, or take this one first: either
  // way it is in update number average_update.
  outcome.global_step = target_.global_step();
  return outcome;
}

PushOutcome AveragedUpdates::AdmitDuplicate(const PushSender& sender) {
  PushOutcome outcome = ApplyOnArrival::AdmitDuplicate(sender);
  if (!WaitsForEachWorker() || sender.worker.empty()) return outcome;
  // Most often a unit trained again after its trainer died having pushed
  // it: the open update would wait out average_wait_ms for this worker's
  // push, which is in the weights already. It stands in for that push,
  // and like a push it is answered once its update is applied, which
  // keeps its worker in step with the others.
  outcome.averaged_later = true;
  outcome.average_update =
      Place(sender, /*once_per_worker=*/true,
            [&](PushAverage& update, absl::Time now) { update.AddStandIn(sender.worker, now); });
  return outcome;
}

uint64_t AveragedUpdates::Place(const PushSender& sender, bool once_per_worker,
                                const std::function<void(PushAverage&, absl::Time)>& add) {
  bool full = false;
  uint64_t update = 0;
  {
    absl::MutexLock lock(&held_mu_);
    const size_t partitions = target_.partition_map().partitions().size();
    if (held_ == nullptr) held_ = std::make_unique<PushAverage>(partitions);
    if (once_per_worker && held_->Counts(sender.worker)) return taken_ + 1;
    if (once_per_worker && next_ != nullptr && next_->Counts(sender.worker)) return taken_ + 2;
    const bool opens = held_->counted_pushes() == 0;
    const bool for_next = sender.new_worker && !opens && WaitsForEachWorker();
    if (for_next && next_ == nullptr) next_ = std::make_unique<PushAverage>(partitions);
    if (opens) held_opened_by_new_worker_ = sender.new_worker && staleness_.share_of_k;
    add(for_next ? *next_ : *held_, absl::Now());
    update = taken_ + (for_next ? 2 : 1);
    // Held for the next update, it lowers the open one's k: that may be
    // all it waited for.
    full = held_->counted_pushes() >= OpenTarget();
  }
  if (full) ApplyHeld([](const OpenUpdate&) { return true; });
  return update;
}

bool AveragedUpdates::ApplyHeldOlderThan(const AveragingWaits& waits) {
  absl::ReaderMutexLock whole_push(&whole_push_mu_);
  const absl::Time now = absl::Now();
  size_t pushes = 0, k = 0;
  absl::Duration age;
  std::vector<std::string> workers;
  const bool applied = ApplyHeld([&](const OpenUpdate& open) {
    age = open.opened_by_new_worker ? waits.new_workers_round : waits.update;
    if (now - open.since < age) return false;
    pushes = open.held.counted_pushes();
    k = open.k;
    workers = open.held.counted_workers();
    return true;
  });
  if (applied && pushes < k) {
    // Every trainer waiting on it waited the whole time: say when and
    // whose pushes came, so that the shard's membership lines tell whose
    // did not.
    for (std::string& worker : workers) worker = absl::CHexEscape(worker);
    LogInfoF(
        "an averaged update waited out %s: applied with %d of %d pushes at %s (%d so far); "
        "pushed: %s",
        absl::FormatDuration(age), pushes, k, ClockTime(now), waited_out_.fetch_add(1) + 1,
        workers.empty() ? "no named worker" : absl::StrJoin(workers, ", "));
  }
  return applied;
}

bool AveragedUpdates::ApplyHeldIfComplete() {
  absl::ReaderMutexLock whole_push(&whole_push_mu_);
  return ApplyHeld([](const OpenUpdate& open) { return open.held.counted_pushes() >= open.k; });
}

void AveragedUpdates::StopCounting(absl::string_view worker) {
  absl::MutexLock lock(&held_mu_);
  for (const std::unique_ptr<PushAverage>* held : {&held_, &next_}) {
    if (*held != nullptr) (*held)->StopCounting(worker);
  }
}

bool AveragedUpdates::ApplyHeld(const std::function<bool(const OpenUpdate&)>& ready) {
  absl::MutexLock in_order(&apply_mu_);
  PushAverage::Batch batch;
  size_t k = 0;
  {
    absl::MutexLock lock(&held_mu_);
    if (held_ == nullptr || held_->empty()) return false;
    k = OpenTarget();
    if (!ready(OpenUpdate{*held_, k, std::max(held_->oldest(), next_opened_),
                          held_opened_by_new_worker_})) {
      return false;
    }
    batch = held_->Take();
    taken_ += 1;
    held_opened_by_new_worker_ = false;
    if (next_ != nullptr && !next_->empty()) {
      std::swap(held_, next_);  // Its wait starts now, not at its arrival.
      next_opened_ = absl::Now();
    }
  }
  // Stand-ins alone move no weight; the update still counts as applied.
  if (!batch.gradients.empty()) ApplyAverage(std::move(batch), k);
  absl::MutexLock lock(&held_mu_);
  applied_ += 1;
  return true;
}

bool AveragedUpdates::WaitForAveragedUpdate(uint64_t update, absl::Time deadline) const {
  absl::MutexLock lock(&held_mu_);
  auto applied = [this, update]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return applied_ >= update; };
  return held_mu_.AwaitWithDeadline(absl::Condition(&applied), deadline);
}

void AveragedUpdates::ApplyAverage(PushAverage::Batch batch, size_t k) {
  const uint64_t step = target_.BeginUpdate();
  const double lr = target_.LearningRateAt(step);
  auto plan = [&](uint64_t staleness) { return Plan(lr, staleness, step); };
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < batch.counts.size(); ++id) {
    if (batch.counts[id] != 0) ids.push_back(id);
  }
  // A lane's mean holds one partition at a time: it stays in cache for the
  // optimizer.
  std::vector<std::vector<float>> means(target_.apply_lanes());
  target_.ForEachPartition(ids.size(), [&](size_t i, size_t lane) {
    const uint32_t id = ids[i];
    const uint32_t count = batch.counts[id];
    std::vector<float>& mean = means[lane];
    mean.resize(target_.partition_map().partitions()[id].num_elements);
    const float share = ShareOfK(count, k);
    std::vector<GradientRun> runs;
    // Only the elements some push carried take part (push_average.h says why).
    for (const PushAverage::ElementRun& run :
         batch.MeanInto(id, static_cast<int64_t>(mean.size()), mean.data())) {
      runs.push_back(GradientRun{run.begin, run.end - run.begin,
                                 GradientView{v1::DTYPE_FP32, mean.data() + run.begin, share}});
    }
    // The update's base: the contributions' mean base version.
    target_.UpdatePartition(id, (batch.base_sum[id] + count / 2) / count, runs,
                            [&plan, share](uint64_t staleness) {
                              StalenessStep how = plan(staleness);
                              how.round_share = share;
                              return how;
                            });
  });
  target_.CountApplied(batch.push_ids.size());
}

}  // namespace spotps
