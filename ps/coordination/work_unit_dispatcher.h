// WorkUnitDispatcher: splits each epoch into work units in a seeded shuffled
// order and leases them to workers until every unit is committed.
#ifndef SPOTPS_PS_COORDINATION_WORK_UNIT_DISPATCHER_H_
#define SPOTPS_PS_COORDINATION_WORK_UNIT_DISPATCHER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace spotps {

struct DispatchConfig {
  uint32_t num_epochs = 1;
  uint64_t units_per_epoch = 1;
  uint64_t seed = 0;                              // Fixes every epoch's order.
  absl::Duration unit_lease = absl::Seconds(60);  // Commit within this.
};

struct EpochCounts {
  uint64_t committed = 0;
  uint64_t reissued = 0;    // Leases that expired or were released.
  uint64_t duplicated = 0;  // Commits of an already committed unit.
};

// Owns the state of every unit of the current epoch and the counts of all
// epochs. Promises: within an epoch every unit is handed out until one
// commit for it arrives; a lease that expires or is released puts the unit
// back (counted as re-issued); commits are idempotent (a repeat is counted
// as duplicated and changes nothing else); the next epoch starts only when
// every unit of this one is committed. Not thread-safe: the Coordinator
// serializes access.
class WorkUnitDispatcher {
 public:
  enum class Outcome { kUnit, kWait, kDone };
  struct Grant {
    Outcome outcome = Outcome::kWait;
    uint32_t epoch = 0;
    uint64_t index = 0;      // Position in the epoch.
    uint64_t data_unit = 0;  // The samples to train: the epoch's permutation of index.
    std::string push_key;    // PushKey(epoch, index).
    // kWait before the job started (CoordinatorOptions::min_workers): the
    // workers still missing. 0 otherwise.
    uint32_t workers_to_start = 0;
  };

  static absl::StatusOr<WorkUnitDispatcher> Create(const DispatchConfig& config);

  Grant Acquire(uint64_t worker, absl::Time now);
  // Commits a unit for `worker`, which must have held its lease (it may
  // have expired since: the gradient landed all the same). Returns true if
  // the unit was already committed. INVALID_ARGUMENT for a unit that does
  // not exist, FAILED_PRECONDITION for a future epoch, an epoch long gone or
  // a unit never leased (since the last ImportProgress), PERMISSION_DENIED
  // for a worker that never held the unit. An error changes nothing.
  absl::StatusOr<bool> Commit(uint64_t worker, uint32_t epoch, uint64_t index);
  // The errors Commit gives for a unit that does not exist or is not due.
  absl::Status ValidateUnit(uint32_t epoch, uint64_t index) const;
  // ValidateUnit, then whether `worker` ever held the unit's lease: the
  // errors Commit and Release give, without changing anything.
  absl::Status CheckLessee(uint64_t worker, uint32_t epoch, uint64_t index) const;
  // Gives back a unit the worker will not train (drain). OK and no change if
  // its lease to `worker` already ended; the errors of CheckLessee.
  absl::Status Release(uint64_t worker, uint32_t epoch, uint64_t index);
  // Puts every unit leased to `worker` back (it left or its lease expired).
  void ReleaseWorker(uint64_t worker);
  void ExpireLeases(absl::Time now);

  bool done() const { return epoch_ >= config_.num_epochs; }
  uint32_t epoch() const { return epoch_; }
  const DispatchConfig& config() const { return config_; }
  const std::vector<EpochCounts>& counts() const { return counts_; }
  uint64_t leased_now() const;
  // A unit of the current epoch waits to be handed out.
  bool has_pending() const { return !pending_.empty(); }

  // The order of an epoch: a pure function of (seed, epoch).
  static std::vector<uint64_t> EpochOrder(uint64_t seed, uint32_t epoch, uint64_t units);

  // Names unit `index` of `epoch` in this job: the same for every lease of
  // it, across re-issues and rollbacks (WorkUnit.push_key).
  std::string PushKey(uint32_t epoch, uint64_t index) const;

  // Data progress for checkpoints: the job id, the epoch, its committed
  // units and the counts. Import replaces the state (leases are not kept:
  // they re-issue, and late commits of leases from before the import are
  // not counted). A record written before job ids existed keeps this job's
  // id.
  std::string ExportProgress() const;
  absl::Status ImportProgress(const std::string& bytes);

 private:
  enum class UnitState : uint8_t { kPending, kLeased, kCommitted };
  struct Unit {
    UnitState state = UnitState::kPending;
    uint64_t worker = 0;  // The lessee while kLeased.
    absl::Time deadline;
    // Every worker that leased the unit since the epoch started (or since
    // the last ImportProgress): only they may commit it, even late. A commit
    // for a lease from before a rollback may stand for a gradient the
    // restored shard lost, so it is refused.
    std::vector<uint64_t> lessees;
  };

  explicit WorkUnitDispatcher(const DispatchConfig& config) : config_(config) {}
  void StartEpoch(uint32_t epoch);
  void ReturnToPending(uint64_t index);
  // Who may commit unit `index` of `epoch` (this epoch or the one before).
  const std::vector<uint64_t>* LesseesOf(uint32_t epoch, uint64_t index) const;

  DispatchConfig config_;
  // Drawn at random when the job is created and kept in its progress, so
  // that no two jobs (on the same shards or not) share a push key.
  uint64_t job_id_ = 0;
  uint32_t epoch_ = 0;
  std::vector<uint64_t> order_;  // index -> data unit, for epoch_.
  std::vector<Unit> units_;
  // The lessees of the previous epoch's units, for late duplicate commits.
  std::vector<std::vector<uint64_t>> previous_lessees_;
  std::deque<uint64_t> pending_;  // Indices to hand out, in order.
  uint64_t committed_in_epoch_ = 0;
  std::vector<EpochCounts> counts_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_WORK_UNIT_DISPATCHER_H_
