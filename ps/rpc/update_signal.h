// UpdateSignal: how a shard's Watch streams learn that its weights changed,
// without polling the partitions and without a copy per watcher (and the
// bounded, shut-down-able slots of the coordinator's presence streams).
#ifndef SPOTPS_PS_RPC_UPDATE_SIGNAL_H_
#define SPOTPS_PS_RPC_UPDATE_SIGNAL_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace spotps {

// Owns an update counter, the number of admitted watchers and a shutdown
// flag. Promises: a watcher costs one counter and one shared condition;
// at most `max_watchers` are admitted at once; Shutdown wakes every waiter
// at once and admits nobody after it. Thread-safe.
class UpdateSignal {
 public:
  explicit UpdateSignal(int max_watchers) : max_watchers_(max_watchers) {}

  // Called after anything that changed partition versions.
  void Notify();
  // Wakes every waiter for good (the server is going down).
  void Shutdown();
  bool shut_down() const;

  // Takes a watcher slot: false when all are taken or after Shutdown.
  bool Admit();
  void Release();
  int max_watchers() const { return max_watchers_; }

  uint64_t count() const;
  // Waits until the counter is not `seen`, Shutdown, or `deadline`;
  // returns the counter then.
  uint64_t WaitForChange(uint64_t seen, absl::Time deadline) const;

 private:
  const int max_watchers_;
  mutable absl::Mutex mu_;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_UPDATE_SIGNAL_H_
