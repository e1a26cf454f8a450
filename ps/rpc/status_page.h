// StatusPage: shard 0's live dashboard on its metrics port: `/` is a
// self-contained HTML page (inline CSS, JS and SVG, nothing fetched from
// elsewhere) that polls `/status.json` and draws the job's state.
#ifndef SPOTPS_PS_RPC_STATUS_PAGE_H_
#define SPOTPS_PS_RPC_STATUS_PAGE_H_

#include <string>

#include "ps/checkpoint/shard_checkpointer.h"
#include "ps/coordination/coordinator.h"
#include "ps/coordination/peer_shards.h"
#include "ps/coordination/training_history.h"
#include "ps/store/shard_store.h"

namespace spotps {

// Borrows shard 0's pieces; any but the store may be null (then the page
// says what it cannot show). Promises: Json() reads each owner's state
// under its own lock and asks each peer shard for its Stats with a 500 ms
// deadline, so a slow or dead peer delays the page by at most that and is
// shown as unreachable; strings from the network (worker names) are escaped.
class StatusPage {
 public:
  StatusPage(const ShardStore* store, const ShardCheckpointer* checkpointer,
             Coordinator* coordinator, const TrainingHistory* history, PeerShards* peers)
      : store_(store),
        checkpointer_(checkpointer),
        coordinator_(coordinator),
        history_(history),
        peers_(peers) {}

  // The page (never changes; all data comes from Json()).
  static const std::string& Html();
  // Workers, epochs, loss history, throughput, shards, checkpoints.
  std::string Json();

 private:
  const ShardStore* const store_;
  const ShardCheckpointer* const checkpointer_;
  Coordinator* const coordinator_;
  const TrainingHistory* const history_;
  PeerShards* const peers_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_STATUS_PAGE_H_
