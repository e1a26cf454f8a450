// CheckpointRoundDriver: shard 0's driver of cluster-wide checkpoints, and its
// watch for shards that restarted from one.
//
// A round with id N first snapshots the coordinator's data progress, then
// has every shard write checkpoint N. A unit is committed only after its
// gradient was acknowledged by every shard, so every unit the progress of
// round N counts is in every shard's weights of round N: restoring round N
// never loses a unit, and units done after it are trained again. A shard
// that restarts during a round refuses to write it, so no round mixes a
// shard's state from before and after a restart.
#ifndef SPOTPS_PS_CHECKPOINT_CHECKPOINT_ROUND_DRIVER_H_
#define SPOTPS_PS_CHECKPOINT_CHECKPOINT_ROUND_DRIVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/background_loop.h"
#include "ps/checkpoint/shard_checkpointer.h"
#include "ps/coordination/coordinator.h"
#include "ps/coordination/peer_shards.h"
#include "ps/store/shard_store.h"
#include "spotps/v1/coordinator.pb.h"

namespace spotps {

struct CheckpointRoundOptions {
  absl::Duration every = absl::ZeroDuration();  // Zero: only on request.
  absl::Duration peer_poll = absl::Seconds(1);
};

// Owns the round thread and what it knows of each other shard; borrows the
// connections to them. Promises: rounds are serialized and their ids only
// grow (above every id any shard reports); when another shard restarts from
// checkpoint K, the coordinator's data progress is rolled back to round K's.
class CheckpointRoundDriver {
 public:
  // `coordinator` may be null; `peers` are shards 1..n-1.
  CheckpointRoundDriver(ShardStore* store, ShardCheckpointer* own, Coordinator* coordinator,
                        PeerShards* peers, const CheckpointRoundOptions& options);
  ~CheckpointRoundDriver();

  void Start();
  // Runs one round now; FAILED_PRECONDITION before the model is initialised.
  absl::StatusOr<v1::CheckpointNowResponse> RunNow();

 private:
  // Every peer_poll: watches the peers, and runs a round when one is due.
  void Tick();
  void WatchPeers();
  // Learns every peer's incarnation (a round must not span a restart) and
  // returns an id above every checkpoint any shard has.
  absl::StatusOr<uint64_t> PrepareRound();

  ShardStore* const store_;
  ShardCheckpointer* const own_;
  Coordinator* const coordinator_;  // May be null.
  PeerShards* const peers_;
  const CheckpointRoundOptions options_;
  absl::Mutex mu_;
  // Each peer's incarnation as last seen; 0 before the first contact.
  std::vector<uint64_t> incarnations_ ABSL_GUARDED_BY(mu_);
  absl::Time next_round_;  // Used by the loop thread only.
  BackgroundLoop loop_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_CHECKPOINT_CHECKPOINT_ROUND_DRIVER_H_
