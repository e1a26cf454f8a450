// CheckpointRounds: shard 0's driver of cluster-wide checkpoints, and its
// watch for shards that restarted from one.
//
// A round with id N first snapshots the coordinator's data progress, then
// has every shard write checkpoint N. A unit is committed only after its
// gradient was acknowledged by every shard, so every unit the progress of
// round N counts is in every shard's weights of round N: restoring round N
// never loses a unit, and units done after it are trained again. A shard
// that restarts during a round refuses to write it, so no round mixes a
// shard's state from before and after a restart.
#ifndef SPOTPS_PS_CHECKPOINT_ROUNDS_H_
#define SPOTPS_PS_CHECKPOINT_ROUNDS_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/rpc_retry.h"
#include "ps/coordinator.h"
#include "ps/shard_checkpointer.h"
#include "ps/shard_store.h"
#include "spotps/v1/coordinator.pb.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

struct CheckpointRoundOptions {
  absl::Duration every = absl::ZeroDuration();  // Zero: only on request.
  std::vector<std::string> peer_addresses;      // Shards 1..n-1, in order.
  absl::Duration peer_poll = absl::Seconds(1);
};

// Owns the round thread and one stub per other shard. Promises: rounds are
// serialized and their ids only grow (above every id any shard reports);
// when another shard restarts from checkpoint K, the coordinator's data
// progress is rolled back to round K's.
class CheckpointRounds {
 public:
  CheckpointRounds(ShardStore* store, ShardCheckpointer* own, Coordinator* coordinator,
                   const CheckpointRoundOptions& options);
  ~CheckpointRounds();

  void Start();
  // Runs one round now; FAILED_PRECONDITION before the model is initialised.
  absl::StatusOr<v1::CheckpointNowResponse> RunNow();

 private:
  struct Peer {
    std::string address;
    std::unique_ptr<v1::ParameterServer::Stub> stub;
    uint64_t incarnation = 0;
  };

  void Loop();
  void WatchPeers();
  // Learns every peer's incarnation (a round must not span a restart) and
  // returns an id above every checkpoint any shard has.
  absl::StatusOr<uint64_t> PrepareRound();

  ShardStore* const store_;
  ShardCheckpointer* const own_;
  Coordinator* const coordinator_;  // May be null.
  const CheckpointRoundOptions options_;
  std::vector<Peer> peers_;  // Shards 1..n-1; used by the round thread and RunNow under mu_.
  absl::Mutex mu_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_CHECKPOINT_ROUNDS_H_
