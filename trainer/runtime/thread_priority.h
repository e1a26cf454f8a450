// ComputeFirstPriority: keeps a trainer's compute threads ahead of its
// other threads on a shared host. At 2 compute threads on 2 cores, a gRPC
// or BF16-conversion thread that preempts one OpenMP worker stalls the
// whole team at its next barrier; niced down, such threads run in the gaps.
#ifndef SPOTPS_TRAINER_RUNTIME_THREAD_PRIORITY_H_
#define SPOTPS_TRAINER_RUNTIME_THREAD_PRIORITY_H_

#include <set>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace spotps {

// Owns the record of which of this process's threads compute (the thread
// that constructs it and LibTorch's OpenMP team) and which it lowered.
// Promises: only raises nice values (always permitted, no privileges), never
// touches a compute thread or another process. Thread-safe.
class ComputeFirstPriority {
 public:
  // `nice` (1..19): how far below the calling thread other threads are
  // lowered (capped at 19); 0 turns it off.
  // Call from the thread that will run the forward/backward, after the
  // intra-op thread count is set.
  explicit ComputeFirstPriority(int nice);

  // Lowers every thread of this process started since the last call that
  // is not a compute thread (threads inherit their creator's nice value,
  // but pools grow lazily, so call this once per step). Cheap: one
  // directory listing of /proc/self/task.
  absl::Status LowerOtherThreads();
  // Lowers the calling thread (a transfer task, first thing).
  absl::Status LowerThisThread();

  int nice() const { return nice_; }
  int compute_threads() const;

 private:
  const int nice_;
  int target_ = 0;  // The nice value lowered threads get.
  mutable absl::Mutex mu_;
  std::set<int> compute_ ABSL_GUARDED_BY(mu_);
  std::set<int> lowered_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_THREAD_PRIORITY_H_
