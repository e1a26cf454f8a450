// WeightSubscription: keeps a serving replica's copy of the weights fresh.
//
//   auto sub = spotps::WeightSubscription::Start(cluster.get(), options,
//       [](const spotps::WeightSnapshot& w) { ... swap w into the model ... });
//   std::shared_ptr<const spotps::WeightSnapshot> now = (*sub)->Latest();
//
// Every shard tells the subscription when its partitions change (the Watch
// stream of parameter_server.proto); the subscription then pulls only the
// partitions that changed, at most once per `min_interval`, and publishes
// the result as a new immutable snapshot. Changes quicker than min_interval
// are folded into one snapshot: a subscriber always gets the newest weights,
// not every step.
#ifndef SPOTPS_CLIENT_WEIGHT_SUBSCRIPTION_H_
#define SPOTPS_CLIENT_WEIGHT_SUBSCRIPTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cluster.h"

namespace spotps {

// Which snapshots may be published.
enum class SnapshotConsistency {
  // Any pulled state: partitions may come from different updates.
  kAny,
  // Only states where every partition of every shard has the same version:
  // in --consistency=sync, exactly the weights after one whole sync round.
  kSyncRound,
  // Only the weights of a checkpoint round: every shard's newest checkpoint
  // has the same id, and the pull read every partition at the version it
  // has in that checkpoint. A round the weights moved on from before they
  // could be pulled is skipped (its weights are only in the files).
  kCheckpointRound,
};

struct SubscriptionOptions {
  v1::DType wire_dtype = v1::DTYPE_FP32;
  // At most one pull per this interval (the first one is immediate).
  absl::Duration min_interval = absl::Milliseconds(100);
  SnapshotConsistency consistency = SnapshotConsistency::kAny;
  // Each Watch stream asks the shard for this long, then is opened again.
  absl::Duration stream_duration = absl::Seconds(60);
  // Backoff between attempts after an error (a shard down, a failed pull).
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
};

// Owns one Watch stream per shard (own connections), the thread that
// pulls, and the newest published snapshot. Promises: snapshots are
// published in order, each with versions different from the one before and
// as consistent as asked; the callback runs on the subscription's
// thread, one call at a time; errors are retried with backoff until Stop
// (last_error() says what went wrong). Latest() and the counters are
// thread-safe.
class WeightSubscription {
 public:
  using Callback = std::function<void(const WeightSnapshot&)>;

  // `cluster` must know the layout and outlive the subscription.
  // FAILED_PRECONDITION without a layout, INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<WeightSubscription>> Start(
      Cluster* cluster, const SubscriptionOptions& options, Callback on_update = nullptr);
  ~WeightSubscription();  // Stops.

  // Cancels the streams and joins the threads; idempotent.
  void Stop();

  // The newest published snapshot; null before the first.
  std::shared_ptr<const WeightSnapshot> Latest() const;
  // Snapshots published so far.
  int64_t published() const;
  // Waits until more than `count` snapshots were published, or `timeout`.
  bool WaitForPublished(int64_t count, absl::Duration timeout) const;
  // kCheckpointRound: the checkpoint id of the newest published snapshot.
  uint64_t published_checkpoint_id() const;
  // The last error a stream or a pull met; OK if none yet.
  absl::Status last_error() const;

 private:
  struct ShardWatch;
  WeightSubscription(Cluster* cluster, const SubscriptionOptions& options, Callback on_update);

  void WatchShard(size_t shard);
  void PullLoop();
  void RecordError(const absl::Status& status);
  // Sleeps for `d` unless Stop comes first; false if stopped.
  bool SleepUnlessStopped(absl::Duration d);
  // The checkpoint every shard reported last, if they agree on one.
  struct CheckpointRound {
    uint64_t id = 0;  // 0: none common to every shard.
    std::vector<uint64_t> versions;
  };
  CheckpointRound CommonCheckpoint() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a snapshot at `versions` may be published.
  bool Publishable(const std::vector<uint64_t>& versions, const CheckpointRound& round) const;

  Cluster* const cluster_;
  const SubscriptionOptions options_;
  const Callback on_update_;
  std::vector<std::unique_ptr<ShardWatch>> shards_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The versions the shards reported last, by partition id.
  std::vector<uint64_t> watched_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped by every report.
  // Each shard's newest checkpoint id, and the partitions' versions in it.
  std::vector<uint64_t> checkpoint_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> checkpoint_versions_ ABSL_GUARDED_BY(mu_);
  uint64_t published_checkpoint_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const WeightSnapshot> latest_ ABSL_GUARDED_BY(mu_);
  int64_t published_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);

  std::vector<std::thread> threads_;
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_WEIGHT_SUBSCRIPTION_H_
