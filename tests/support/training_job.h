// TrainingJob: a whole local spotps job in real processes (2 shards, shard 0
// coordinating, any number of trainers) for the end-to-end elasticity tests.
#ifndef SPOTPS_TESTS_SUPPORT_TRAINING_JOB_H_
#define SPOTPS_TESTS_SUPPORT_TRAINING_JOB_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "spotps/v1/coordinator.pb.h"
#include "tests/support/child_process.h"

namespace spotps::testing {

struct JobOptions {
  int epochs = 2;
  int units_per_epoch = 200;
  std::string consistency = "async";
  // Leave the optimizer to the shards' defaults for `consistency` instead
  // of AdamW at lr 2e-3 with 10 warmup updates.
  bool default_optimizer = false;
  // Each trainer step: batch x seq_len tokens of `model` (a preset or a
  // TorchScript file).
  std::string model = "tiny";
  int batch = 8;
  int seq_len = 64;
  // Passed to every trainer after the others (e.g. --rpc_deadline_s=3).
  std::vector<std::string> trainer_flags;
  // Passed to every shard after the others (so they override them, e.g.
  // the short --worker_lease_s=2 and --unit_lease_s=6 the tests use).
  std::vector<std::string> shard_flags;
};

// Owns the job's processes; their logs and checkpoints go to `dir`.
// Promises: every process it started is killed when it is destroyed.
class TrainingJob {
 public:
  TrainingJob(std::string dir, std::string tokens, JobOptions options = {});

  // Starts 2 shards; `durable` gives them checkpoints (a round every 2 s).
  absl::Status StartShards(bool durable);
  // Picks the shards' ports (and flags) without starting them, so that
  // trainers can start first; StartShards() then starts them there.
  absl::Status ReserveShards(bool durable);
  // Starts one more trainer (logs to trainer<N>.log); `extra_flags` go
  // after JobOptions::trainer_flags, for this trainer only.
  absl::Status StartTrainer(const std::vector<std::string>& extra_flags = {});
  // Indices of trainers still running.
  std::vector<int> Running();

  absl::StatusOr<v1::ProgressResponse> Progress() { return coordinator_->Progress(); }
  // A checkpoint round now (durable shards), rather than at the next tick.
  absl::StatusOr<v1::CheckpointNowResponse> CheckpointNow() {
    return coordinator_->CheckpointNow();
  }
  absl::StatusOr<v1::ProgressResponse> WaitDone(absl::Duration timeout);
  // Validation loss of the current weights, read through the client library.
  absl::StatusOr<double> ValLoss();
  // Trainers leave by themselves when the job is done; then the shards are
  // stopped. Returns how many processes had to be killed.
  int Shutdown();

  std::vector<std::unique_ptr<ChildProcess>>& trainers() { return trainers_; }
  LocalShardCluster& shards() { return *shards_; }
  const std::string& dir() const { return dir_; }

 private:
  const std::string dir_, tokens_;
  const JobOptions options_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  std::vector<std::unique_ptr<ChildProcess>> trainers_;
};

// The last lines of every *.log in `dir`, for failure messages.
std::string LogTails(const std::string& dir);

// Running processes whose command line mentions `marker` (a test's dir).
int ProcessesMentioning(const std::string& marker);

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_TRAINING_JOB_H_
