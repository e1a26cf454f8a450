// ShardCheckpointer: one shard's durability. Restores the newest intact
// checkpoint when the process starts and writes numbered checkpoints on
// request (shard 0's checkpoint rounds ask every shard for the same id).
#ifndef SPOTPS_PS_CHECKPOINT_SHARD_CHECKPOINTER_H_
#define SPOTPS_PS_CHECKPOINT_SHARD_CHECKPOINTER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/checkpoint/checkpoint_directory.h"
#include "ps/store/shard_store.h"

namespace spotps {

struct CheckpointWriteResult {
  uint64_t bytes = 0;
  double seconds = 0;
};

// Owns the shard's CheckpointDirectory. Promises: writes are serialized;
// a checkpoint is complete on disk (fsynced, renamed) before Write returns;
// the ids it reports only grow.
class ShardCheckpointer {
 public:
  static constexpr uint64_t kMaxIdStep = uint64_t{1} << 20;

  static absl::StatusOr<std::unique_ptr<ShardCheckpointer>> Open(const std::string& directory,
                                                                 uint32_t shard_index,
                                                                 int keep_last);

  // Loads the newest intact checkpoint into `store` (which must be fresh).
  // Returns its extra blob (the coordinator's data progress on shard 0), or
  // NOT_FOUND when there is none; files it skipped are reported on stderr.
  absl::StatusOr<std::string> Restore(ShardStore* store);

  // Writes `store` as checkpoint `id` with `extra_blob`. FAILED_PRECONDITION
  // if the store is not initialised yet (nothing to save) or `id` is below
  // the newest this shard wrote (ids only grow; the newest may be written
  // again); INVALID_ARGUMENT for id 0 or an id more than kMaxIdStep above
  // the newest, so that no stray request can push the ids towards their
  // wrap-around and stop every later round.
  absl::StatusOr<CheckpointWriteResult> Write(uint64_t id, const ShardStore& store,
                                              absl::string_view extra_blob);

  // The extra blob of an older checkpoint of this shard (for rollbacks).
  absl::StatusOr<std::string> ExtraBlobOf(uint64_t id) const;

  uint64_t restored_id() const { return restored_id_.load(); }
  uint64_t last_written_id() const { return last_written_id_.load(); }

  // The newest checkpoint this process wrote and the version of each
  // partition in it (ascending ids); id 0 and none before the first.
  struct WrittenVersions {
    uint64_t id = 0;
    std::vector<std::pair<uint32_t, uint64_t>> versions;
  };
  WrittenVersions last_written_versions() const {
    absl::MutexLock lock(&failure_mu_);
    return last_written_versions_;
  }

  // The last write that failed on disk (e.g. ENOSPC) and when; cleared by
  // the next successful write. Empty message and absl::InfinitePast() if none.
  struct Failure {
    std::string message;
    absl::Time time = absl::InfinitePast();
  };
  Failure last_failure() const {
    absl::MutexLock lock(&failure_mu_);
    return last_failure_;
  }

  // The last write that succeeded: when it ended and how long it took
  // (for --metrics_listen). Time absl::InfinitePast() if none yet.
  struct Success {
    uint64_t id = 0;
    absl::Time time = absl::InfinitePast();
    double seconds = 0;
    uint64_t bytes = 0;
  };
  Success last_success() const {
    absl::MutexLock lock(&failure_mu_);
    return last_success_;
  }

 private:
  explicit ShardCheckpointer(CheckpointDirectory files) : files_(std::move(files)) {}

  absl::Mutex write_mu_;
  CheckpointDirectory files_;
  std::atomic<uint64_t> restored_id_{0};
  std::atomic<uint64_t> last_written_id_{0};
  mutable absl::Mutex failure_mu_;
  Failure last_failure_ ABSL_GUARDED_BY(failure_mu_);
  Success last_success_ ABSL_GUARDED_BY(failure_mu_);
  WrittenVersions last_written_versions_ ABSL_GUARDED_BY(failure_mu_);
};

}  // namespace spotps

#endif  // SPOTPS_PS_CHECKPOINT_SHARD_CHECKPOINTER_H_
