// SyncRound: the open round of synchronous training (--consistency=sync):
// which unit each live worker trains in it, and whose gradients have landed.
#ifndef SPOTPS_PS_COORDINATION_SYNC_ROUND_H_
#define SPOTPS_PS_COORDINATION_SYNC_ROUND_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ps/coordination/work_unit_dispatcher.h"

namespace spotps {

// Owns the bookkeeping of one round at a time (numbered from 1). Promises:
// a worker trains at most one unit per round; the round closes only once it
// holds a gradient and no live worker still owes one (a worker owes one
// unless it contributed, or it holds no unit and none is left to hand out),
// so a dead or departed worker never holds a round up past its lease; a
// worker that leaves gives back the unit it held but its landed gradient
// stays in the round. Not thread-safe: the Coordinator serializes access.
class SyncRound {
 public:
  struct Contribution {
    uint64_t worker = 0;
    uint32_t epoch = 0;
    uint64_t index = 0;
    std::string push_id;  // The push that carried the gradient to every shard.
  };

  uint64_t number() const { return number_; }
  bool closed() const { return closed_; }
  size_t num_contributions() const { return contributed_.size(); }
  std::vector<Contribution> contributions() const;

  // The unit `worker` holds in this round; null if none.
  const WorkUnitDispatcher::Grant* Held(uint64_t worker) const;
  bool Contributed(uint64_t worker) const { return contributed_.count(worker) != 0; }
  void Hold(uint64_t worker, const WorkUnitDispatcher::Grant& grant);
  // Records that the gradient for the unit `worker` holds landed. A repeat
  // of a recorded contribution is accepted; ABORTED when the worker holds no
  // such unit in this round (it was dropped, or the round closed without it).
  absl::Status Contribute(uint64_t worker, uint32_t epoch, uint64_t index,
                          const std::string& push_id);
  // Forgets a worker's held unit (it left, or gave the unit back) and
  // returns it; nullopt if it held none.
  std::optional<WorkUnitDispatcher::Grant> Drop(uint64_t worker);

  // Closes the round if it is complete (see the class comment) and returns
  // whether it is closed.
  bool CloseIfComplete(const std::vector<uint64_t>& live_workers, bool units_left);
  // Ends this round, applied or not, and opens the next one; returns the
  // ended round's contributions.
  std::vector<Contribution> Advance();

 private:
  uint64_t number_ = 1;
  bool closed_ = false;
  std::map<uint64_t, WorkUnitDispatcher::Grant> held_;  // By worker.
  std::map<uint64_t, Contribution> contributed_;        // By worker.
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_SYNC_ROUND_H_
