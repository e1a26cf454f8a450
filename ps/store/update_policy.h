// UpdatePolicy: how a shard's validated pushes become optimizer updates (the
// consistency modes), and UpdateTarget, what a ShardStore offers a policy.
//
// ShardStore owns the partitions, validates every request and applies an
// update; the policy decides when a push is applied and with what:
//   ApplyOnArrival   async: each push at once (staleness none, lr, dc,
//                    momentum; ssp is async with --max_staleness);
//   AveragedUpdates  async "avg" and "fresh": the mean of k pushes at once;
//   LocalRounds      local:H: averaged pseudo-gradients, a short update
//                    moving the weights by its share of k;
//   DelayedNesterov  local:H with "delayed": pseudo-gradients on arrival,
//                    the outer momentum stepped once per k of them;
//   SyncRounds       sync: whole gradients held until the round closes.
#ifndef SPOTPS_PS_STORE_UPDATE_POLICY_H_
#define SPOTPS_PS_STORE_UPDATE_POLICY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/partition_map.h"
#include "ps/store/optimizer.h"
#include "ps/store/payload_range.h"
#include "ps/store/recent_push_ids.h"
#include "ps/store/staleness_method.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

// Who sent a push, as the shard counts its live workers.
struct PushSender {
  absl::string_view worker;  // PushRequest.worker_id; empty: a client not counted.
  bool new_worker = false;   // Its worker was not counted live before this push.
};

struct PushOutcome {
  bool duplicate = false;
  // Async "avg": held for the next averaged update (acknowledged, not
  // applied yet; versions and global_step are the current ones), the
  // `average_update`-th averaged update since the shard started.
  bool averaged_later = false;
  uint64_t average_update = 0;
  bool deferred = false;  // Sync mode: held for the round, not applied yet.
  uint64_t global_step = 0;
  std::vector<uint32_t> partition_ids;  // Partitions updated, ascending.
  std::vector<uint64_t> new_versions;
  std::vector<uint64_t> staleness;
};

struct RoundOutcome {
  bool already_applied = false;  // A retry of the last round: nothing changed.
  uint64_t global_step = 0;
};

// Elements [offset, offset + n) of one partition and their gradient.
struct GradientRun {
  int64_t offset = 0;
  int64_t n = 0;
  GradientView gradient;
};

// One partition's update as applied: the versions its gradient missed, and
// the version the update made.
struct PartitionUpdate {
  uint64_t staleness = 0;
  uint64_t version = 0;
};

// What a ShardStore offers its policy: versions, the one way to change a
// partition, and the counters. Every method is thread-safe.
class UpdateTarget {
 public:
  virtual ~UpdateTarget() = default;

  // Counts one more update (pushes, an averaged update or a round) and
  // returns the global step before it, which the learning rate follows.
  virtual uint64_t BeginUpdate() = 0;
  virtual uint64_t global_step() const = 0;
  virtual double LearningRateAt(uint64_t step) const = 0;
  // One optimizer step of owned partition `id` over `runs`, under the
  // partition's lock: `plan` gets the staleness (versions applied since
  // `base_version`) and says how to step.
  virtual PartitionUpdate UpdatePartition(
      uint32_t id, uint64_t base_version, const std::vector<GradientRun>& runs,
      const std::function<StalenessStep(uint64_t staleness)>& plan) = 0;
  // Calls fn(i, lane) for each i in [0, n), side by side on the store's
  // apply lanes where they are free, the lowest i first (partition_lanes.h);
  // lane < apply_lanes() names per-thread scratch.
  virtual void ForEachPartition(size_t n, const std::function<void(size_t i, size_t lane)>& fn) = 0;
  virtual size_t apply_lanes() const = 0;
  virtual uint64_t CurrentVersion(uint32_t id) const = 0;
  // Checks the ranges' base versions (one per partition, not from the
  // future, within --max_staleness; with `current_only`, exactly the
  // current version): ABORTED or OUT_OF_RANGE otherwise.
  virtual absl::Status CheckBaseVersions(const std::vector<PayloadRange>& ranges,
                                         bool current_only) const = 0;
  virtual const PartitionMap& partition_map() const = 0;
  virtual const std::vector<uint32_t>& owned_partitions() const = 0;
  // The ids of pushes whose updates the partitions hold (async modes).
  virtual RecentPushIds& recent_push_ids() = 0;
  // What the staleness method sees for an update of `staleness` after
  // `updates_done` updates.
  virtual AsyncView View(uint64_t staleness, uint64_t updates_done) const = 0;
  // The live workers; 0 when unknown.
  virtual int live_workers() const = 0;
  // The live workers, or 1 when unknown: nobody pushed lately (the count
  // follows pushes within 100 ms), so this push's client is alone.
  size_t live_workers_or_one() const {
    const int live = live_workers();
    return live > 0 ? static_cast<size_t>(live) : size_t{1};
  }
  virtual void ObserveStaleness(uint64_t staleness) = 0;
  virtual void CountApplied(uint64_t pushes) = 0;
  virtual void CountDuplicate() = 0;
};

// A consistency mode. Promises: a push it takes is applied at most once;
// what it holds and has not applied is never in an exported state.
class UpdatePolicy {
 public:
  virtual ~UpdatePolicy() = default;

  // Takes a push the store validated (id, ranges, dtype, scale): applies
  // it, holds it, or finds it a duplicate. An error refuses it and changes
  // nothing. `sender`: as ShardStore::Push says.
  virtual absl::StatusOr<PushOutcome> Take(absl::string_view push_id, v1::DType dtype,
                                           const std::vector<PayloadRange>& ranges, float scale,
                                           const PushSender& sender) = 0;
  // Runs `copy` while no update is under way, so that what it copies holds
  // whole updates only (a checkpoint's weights and the ids of their pushes).
  virtual void WhileNoUpdate(const std::function<void()>& copy) = 0;
  // Removes from *ids the pushes held and not applied yet (run inside
  // WhileNoUpdate).
  virtual void DropHeld(std::vector<std::string>* ids) const { (void)ids; }
  // Sets the counters of a Stats reply that are the policy's own.
  virtual void FillStats(v1::StatsResponse* stats) const { (void)stats; }

  // Averaged updates (ShardStore::ApplyHeldOlderThan and the like say
  // what); other policies hold nothing.
  virtual bool ApplyHeldOlderThan(const AveragingWaits& waits) {
    (void)waits;
    return false;
  }
  // Applies the held update if it already holds its k pushes (k fell: a
  // worker left or fell silent); whether it applied one.
  virtual bool ApplyHeldIfComplete() { return false; }
  // `worker` stopped counting: the pushes of it that are held no longer
  // count toward completing their update (ShardStore::StopCounting).
  virtual void StopCounting(absl::string_view worker) { (void)worker; }
  virtual bool WaitForAveragedUpdate(uint64_t update, absl::Time deadline) const;
  virtual size_t held_pushes() const { return 0; }
  // Sync rounds (ShardStore::ApplyRound); FAILED_PRECONDITION elsewhere.
  virtual absl::StatusOr<RoundOutcome> ApplyRound(const std::vector<std::string>& push_ids);
};

// The policy for a shard: sync rounds, local rounds, averaged updates or
// apply on arrival, as `staleness` (already validated) and `sync_rounds`
// say.
struct UpdatePolicyConfig {
  StalenessConfig staleness;
  OptimizerConfig optimizer;
  bool sync_rounds = false;
  size_t max_round_contributions = 64;
};
std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const UpdatePolicyConfig& config,
                                               UpdateTarget& target);

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_UPDATE_POLICY_H_
