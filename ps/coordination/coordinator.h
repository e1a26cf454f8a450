// Coordinator: membership of trainers plus the dispatch of work units,
// behind one lock, with the rule that ties them: when a worker's lease
// expires or it leaves, its units go back to be re-issued.
#ifndef SPOTPS_PS_COORDINATION_COORDINATOR_H_
#define SPOTPS_PS_COORDINATION_COORDINATOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/consistency.h"
#include "common/work_limits.h"
#include "ps/coordination/lease_table.h"
#include "ps/coordination/sync_round.h"
#include "ps/coordination/work_unit_dispatcher.h"
#include "spotps/v1/coordinator.pb.h"

namespace spotps {

struct CoordinatorOptions {
  DispatchConfig dispatch;
  absl::Duration worker_lease = absl::Seconds(10);
  Consistency consistency;
  // How long an Acquire that would answer WAIT first waits for the next
  // sync round to open, or for the job to start (a long poll, so rounds
  // follow each other fast and every waiting worker starts at once).
  absl::Duration sync_acquire_wait = absl::Seconds(1);
  // The job starts once this many workers are registered together: until
  // then Acquire leases nothing (Grant::workers_to_start says how many are
  // missing), so that the first workers start on the same weights and
  // their first gradients meet in one update. Then workers come and go
  // freely. 0 or 1: no start gate. A job restored with committed units has
  // started already.
  size_t min_workers = 0;
  // Registered workers at most: each costs memory and every call scans them.
  size_t max_workers = 4096;
  // How long a worker whose last presence stream broke keeps its lease
  // (ClosePresence); zero: a broken stream changes nothing.
  absl::Duration presence_grace = absl::Seconds(2);
};

// A sync round that closed and must now be applied on every shard.
struct ClosedRound {
  uint64_t number = 0;
  std::vector<std::string> push_ids;
};

// The most tokens one work unit may hold (a batch of 4,096 sequences of
// 4,096 tokens): what a worker says at registration, and what its training
// reports may claim per unit when it says nothing.
inline constexpr uint64_t kMaxTokensPerUnit = uint64_t{1} << 24;

// Owns the LeaseTable, the WorkUnitDispatcher and, in sync mode, the open
// SyncRound. Promises: thread-safe; every call first expires stale workers
// (releasing their units), so a dead worker never holds work past its
// lease; in async and SSP modes a commit is accepted from any worker the
// unit was leased to, live or not (the gradient it stands for has landed),
// and from no other. With an SSP
// bound, Acquire answers WAIT to a worker too far ahead of the slowest live
// one; the slowest is never held back and dead workers leave the clock with
// their lease. In sync mode each live worker trains one unit per round; a
// commit adds its push to the round, and the round's units count as
// committed only once FinishRound reports the round applied on every shard.
// No membership change can deadlock any mode. With min_workers, no unit is
// leased before the job has started, and nothing closes the gate again.
class Coordinator {
 public:
  using Clock = std::function<absl::Time()>;

  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options,
                                                             Clock clock = absl::Now);

  // RESOURCE_EXHAUSTED when max_workers are registered already.
  // `tokens_per_unit` (0: not said) is at most kMaxTokensPerUnit.
  absl::StatusOr<uint64_t> Register(const std::string& name, uint64_t tokens_per_unit = 0);
  // NOT_FOUND when the worker is unknown or its lease expired.
  absl::Status Heartbeat(uint64_t worker);
  // Presence: a worker's Attend streams. Opening one renews the lease as a
  // Heartbeat does (and its errors). When the last one closes `broken` (not
  // ended by the coordinator or after Deregister), the lease is cut to
  // presence_grace: a trainer killed mid-step gives its units back in about
  // that rather than a whole worker_lease, and a live one opens a stream
  // again (or heartbeats) before it ends.
  absl::Status OpenPresence(uint64_t worker);
  void ClosePresence(uint64_t worker, bool broken);
  // NOT_FOUND when the worker is unknown or its lease expired (its units
  // went back already).
  absl::Status Deregister(uint64_t worker);
  // Grant::push_key is empty in sync mode.
  absl::StatusOr<WorkUnitDispatcher::Grant> Acquire(uint64_t worker);
  // Returns true if the unit was already committed. Only a worker the unit
  // was leased to may commit it (WorkUnitDispatcher::CheckLessee's errors).
  // Sync mode: `push_id` is required; ABORTED if the round went on without
  // this unit.
  absl::StatusOr<bool> Commit(uint64_t worker, uint32_t epoch, uint64_t index,
                              const std::string& push_id = "");
  // Gives a unit back; the errors of CheckLessee.
  absl::Status Release(uint64_t worker, uint32_t epoch, uint64_t index);

  // Sync mode: waits up to `timeout` for a round to close and returns it;
  // nullopt if none did.
  std::optional<ClosedRound> AwaitClosedRound(absl::Duration timeout);
  // Sync mode: ends closed round `number`. Applied on every shard: its
  // units are committed. Not applied (a shard lost its gradients): its units
  // are re-issued. Ignored if the round was abandoned meanwhile.
  void FinishRound(uint64_t number, bool applied);

  v1::ProgressResponse Progress();
  const Consistency& consistency() const { return options_.consistency; }
  absl::Duration worker_lease() const { return options_.worker_lease; }
  absl::Duration presence_grace() const { return options_.presence_grace; }
  // Infinite in sync mode: a unit stays with its worker while it lives.
  absl::Duration unit_lease() const { return options_.dispatch.unit_lease; }

  std::string ExportProgress();
  // Replaces the data progress (a rollback); an open sync round is abandoned.
  absl::Status ImportProgress(const std::string& bytes);

 private:
  Coordinator(const CoordinatorOptions& options, WorkUnitDispatcher dispatcher, Clock clock);
  bool sync() const { return options_.consistency.mode == v1::CONSISTENCY_SYNC; }
  void ExpireWorkers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives back the units a departed worker held.
  void ReleaseUnitsOf(uint64_t worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<WorkUnitDispatcher::Grant> AcquireInRound(uint64_t worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseRoundIfComplete() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits up to sync_acquire_wait for the job to start; false while it has
  // not (the WAIT Acquire answers then says how many workers are missing).
  bool AwaitStart() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t WorkersToStart() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NotRegistered(uint64_t worker) const;

  const CoordinatorOptions options_;
  const Clock clock_;
  absl::Mutex mu_;
  LeaseTable leases_ ABSL_GUARDED_BY(mu_);
  WorkUnitDispatcher dispatcher_ ABSL_GUARDED_BY(mu_);
  SyncRound round_ ABSL_GUARDED_BY(mu_);
  uint64_t rounds_applied_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rounds_abandoned_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // min_workers were registered together.
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_COORDINATOR_H_
