// CoordinatorClient: how a trainer (or spotps-ctl) talks to the coordinator
// that shard 0 hosts: membership leases and work units.
#ifndef SPOTPS_CLIENT_COORDINATOR_CLIENT_H_
#define SPOTPS_CLIENT_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/presence_stream.h"
#include "common/channel_security.h"
#include "common/retry_policy.h"
#include "spotps/v1/coordinator.pb.h"
#include "spotps/v1/training_report.pb.h"

namespace spotps {

// The push id of rows [row_begin, row_end) of a unit's batch, derived from
// the unit's push_key (WorkUnit.push_key): every lease of the unit pushes
// under the same id, so a shard that applied an earlier lessee's push
// answers `duplicate` and takes the unit's gradient once. Empty when the
// key is unusable (empty in sync mode or from an older coordinator, or not
// 1 to 64 printable characters): push under a fresh id then.
std::string UnitPushId(absl::string_view push_key, int64_t row_begin, int64_t row_end);

// Owns one channel to the coordinator. Promises: every call has a deadline
// and bounded retries (RetryPolicy); thread-safe.
class CoordinatorClient {
 public:
  // `security`: as ClusterOptions::security (the same TLS files and token).
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Connect(
      const std::string& address, const RetryPolicy& policy = {},
      const ChannelSecurity& security = {});

  ~CoordinatorClient();

  // host:port, as given to Connect.
  const std::string& address() const { return address_; }

  // Every call returns UNAVAILABLE or DEADLINE_EXCEEDED once its retries ran
  // out (shard 0 down), and UNIMPLEMENTED if shard 0 hosts no coordinator
  // (started without --epochs).

  // A new lease; the response says how often to heartbeat and the job's
  // consistency mode. The client keeps the response's worker_key and sends
  // it with every later call about that worker (and its reports), so only
  // this client (from the same identity) can act for it. `tokens_per_unit`
  // (batch x seq_len; 0: not said) bounds what this worker's training
  // reports may claim.
  absl::StatusOr<v1::RegisterResponse> Register(const std::string& name,
                                                uint64_t tokens_per_unit = 0);
  // NOT_FOUND: the lease expired (or the coordinator restarted); register
  // again under a new id.
  absl::Status Heartbeat(uint64_t worker_id);
  absl::Status Deregister(uint64_t worker_id);
  // Opens the worker's presence stream (coordinator.proto, AttendRequest):
  // while it is open, a kill of this process shows at the coordinator at
  // once. No retries (open another when it ends); its deadline is a little
  // past the time the coordinator keeps a stream.
  std::unique_ptr<PresenceStream> Attend(uint64_t worker_id);
  // The next work unit, or WAIT / DONE in the response. NOT_FOUND: lease gone.
  absl::StatusOr<v1::AcquireUnitResponse> Acquire(uint64_t worker_id);
  // Returns true if the unit had already been committed. In sync mode
  // `push_id` names the push that carried the unit's gradient (required);
  // ABORTED means the round went on without it.
  absl::StatusOr<bool> Commit(uint64_t worker_id, uint32_t epoch, uint64_t index,
                              const std::string& push_id = "");
  absl::Status Release(uint64_t worker_id, uint32_t epoch, uint64_t index);
  absl::StatusOr<v1::ProgressResponse> Progress();
  // Runs a checkpoint round across all shards now; returns its id.
  // FAILED_PRECONDITION before the model is initialised; UNIMPLEMENTED if
  // the shards run without --checkpoint_dir.
  absl::StatusOr<v1::CheckpointNowResponse> CheckpointNow();
  // Reports a trainer's losses and throughput for the status page. Best
  // effort: one attempt with a deadline of `deadline`, no retries.
  absl::Status Report(const v1::TrainingReportRequest& report,
                      absl::Duration deadline = absl::Seconds(2));

 private:
  CoordinatorClient(std::string address, const RetryPolicy& policy,
                    const ChannelSecurity& security);

  // The worker_key Register returned for `worker_id`; "" if none.
  std::string KeyOf(uint64_t worker_id) const;

  const std::string address_;
  const RetryPolicy policy_;
  mutable absl::Mutex keys_mu_;
  std::map<uint64_t, std::string> keys_ ABSL_GUARDED_BY(keys_mu_);
  struct Connection;  // The channel and stub, kept out of this header.
  std::unique_ptr<Connection> connection_;
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_COORDINATOR_CLIENT_H_
