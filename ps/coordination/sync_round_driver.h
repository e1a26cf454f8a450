// SyncRoundDriver: shard 0's driver of synchronous training (--consistency=sync).
//
// Trainers push their gradient for round r to every shard, where it is held,
// then commit their unit to the coordinator naming the push. Once no live
// worker owes the round a gradient, the coordinator closes it; this driver
// then has every shard apply the mean of exactly the named pushes as one
// update, and reports back: the round's units count as committed only when
// every shard applied it. A shard that cannot (it restarted and lost the
// held gradients, or stays unreachable) makes the round be given up: its
// units are trained again, and shards that did apply it keep that update.
#ifndef SPOTPS_PS_COORDINATION_SYNC_ROUND_DRIVER_H_
#define SPOTPS_PS_COORDINATION_SYNC_ROUND_DRIVER_H_


#include "absl/status/status.h"
#include "common/background_loop.h"
#include "ps/coordination/coordinator.h"
#include "ps/coordination/peer_shards.h"
#include "ps/store/shard_store.h"

namespace spotps {

// Owns the round thread; borrows shard 0's store, the coordinator and the
// connections to the other shards. Promises: rounds are applied one at a
// time, in order, each with bounded retries.
class SyncRoundDriver {
 public:
  SyncRoundDriver(ShardStore* store, Coordinator* coordinator, PeerShards* peers);
  ~SyncRoundDriver();

  void Start();

 private:
  // Applies the next closed round, if one closes within a short wait.
  void Tick();
  // Applies the round on shard 0 and every peer at once.
  absl::Status Apply(const ClosedRound& round);

  ShardStore* const store_;
  Coordinator* const coordinator_;
  PeerShards* const peers_;
  BackgroundLoop loop_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_SYNC_ROUND_DRIVER_H_
