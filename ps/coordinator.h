// Coordinator: membership of trainers plus the dispatch of work units,
// behind one lock, with the rule that ties them: when a worker's lease
// expires or it leaves, its units go back to be re-issued.
#ifndef SPOTPS_PS_COORDINATOR_H_
#define SPOTPS_PS_COORDINATOR_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/lease_table.h"
#include "ps/work_unit_dispatcher.h"
#include "spotps/v1/coordinator.pb.h"

namespace spotps {

struct CoordinatorOptions {
  DispatchConfig dispatch;
  absl::Duration worker_lease = absl::Seconds(10);
  // Stale synchronous parallel: a worker may be at most this many units
  // ahead of the slowest live worker; negative: fully asynchronous.
  int64_t ssp_bound = -1;
};

// "async" or "ssp:S" (S >= 0) into CoordinatorOptions::ssp_bound.
absl::StatusOr<int64_t> ParseConsistency(absl::string_view mode);

// Owns the LeaseTable and the WorkUnitDispatcher. Promises: thread-safe;
// every call first expires stale workers (releasing their units), so a dead
// worker never holds work past its lease; commits are accepted from any
// worker, live or not, because the gradient they stand for has landed. With
// an SSP bound, Acquire answers WAIT to a worker too far ahead of the
// slowest live one; the slowest is never held back and dead workers leave
// the clock with their lease, so no membership change can deadlock.
class Coordinator {
 public:
  using Clock = std::function<absl::Time()>;

  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options,
                                                             Clock clock = absl::Now);

  uint64_t Register(const std::string& name);
  // NOT_FOUND when the worker is unknown or its lease expired.
  absl::Status Heartbeat(uint64_t worker);
  void Deregister(uint64_t worker);
  absl::StatusOr<WorkUnitDispatcher::Grant> Acquire(uint64_t worker);
  absl::StatusOr<bool> Commit(uint64_t worker, uint32_t epoch, uint64_t index);
  void Release(uint64_t worker, uint32_t epoch, uint64_t index);

  v1::ProgressResponse Progress();
  absl::Duration worker_lease() const { return options_.worker_lease; }
  absl::Duration unit_lease() const { return options_.dispatch.unit_lease; }

  std::string ExportProgress();
  absl::Status ImportProgress(const std::string& bytes);

 private:
  Coordinator(const CoordinatorOptions& options, WorkUnitDispatcher dispatcher, Clock clock);
  void ExpireWorkers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  const Clock clock_;
  absl::Mutex mu_;
  LeaseTable leases_ ABSL_GUARDED_BY(mu_);
  WorkUnitDispatcher dispatcher_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATOR_H_
