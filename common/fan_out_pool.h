// FanOutPool: persistent threads for calling every shard (or every stream
// of a shard) at once, so that a trainer's pulls and pushes start no thread
// per step.
#ifndef SPOTPS_COMMON_FAN_OUT_POOL_H_
#define SPOTPS_COMMON_FAN_OUT_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace spotps {

// Owns its threads. Promises: Run(n, fn) calls fn(0) .. fn(n-1) each on a
// pool thread, all at once (the pool grows whenever fewer threads are idle
// than calls are waiting, and keeps its threads for the next Run), so a call
// that itself fans out (a shard's parallel streams) never waits for a
// thread; Run may be called from several threads and from inside fn.
// `on_thread_start` runs once on each new thread before its first call
// (e.g. to pin per-thread library settings away from the caller's threads).
class FanOutPool {
 public:
  explicit FanOutPool(std::function<void()> on_thread_start = nullptr);
  FanOutPool(const FanOutPool&) = delete;
  FanOutPool& operator=(const FanOutPool&) = delete;
  ~FanOutPool();  // Waits for running calls, then joins every thread.

  // Returns one status per call, in index order.
  std::vector<absl::Status> RunAll(size_t n, const std::function<absl::Status(size_t)>& fn);
  // The first error (lowest index) of RunAll, or OK.
  absl::Status Run(size_t n, const std::function<absl::Status(size_t)>& fn);

  size_t num_threads() const;

 private:
  // The calls of one RunAll; shared with the tasks, so none touches freed
  // memory however late it drops its reference.
  struct Batch {
    absl::Mutex mu;
    size_t remaining ABSL_GUARDED_BY(mu) = 0;
    std::vector<absl::Status> results ABSL_GUARDED_BY(mu);
  };
  struct Task {
    std::shared_ptr<Batch> batch;
    const std::function<absl::Status(size_t)>* fn = nullptr;  // Outlives the batch's wait.
    size_t index = 0;
  };

  void WorkerLoop();

  const std::function<void()> on_thread_start_;
  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

// The first error of `results`, or OK.
absl::Status FirstError(const std::vector<absl::Status>& results);

}  // namespace spotps

#endif  // SPOTPS_COMMON_FAN_OUT_POOL_H_
