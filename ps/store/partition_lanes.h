// PartitionLanes: the threads that apply one update's partitions side by
// side, so that an update waited on by every trainer ("fresh") takes a
// fraction of one thread's time where the shard has idle cores.
#ifndef SPOTPS_PS_STORE_PARTITION_LANES_H_
#define SPOTPS_PS_STORE_PARTITION_LANES_H_

#include <atomic>
#include <cstddef>
#include <functional>

#include "common/fan_out_pool.h"

namespace spotps {

// Owns up to `lanes` threads.
// Promises: ForEach(n, fn) calls fn(i, lane) once for each i in [0, n), the
// lowest i first (a pull waiting on the partitions in order gets the first
// ones first), with lane < lanes() naming the calling thread's scratch, and returns
// when every call has. One ForEach at a time gets the helpers: a call made
// while another holds them runs on its caller alone, so that pushes applied
// on many RPC threads at once (async modes) do not multiply threads.
class PartitionLanes {
 public:
  // 0: one lane per core the machine has, at most 8.
  explicit PartitionLanes(size_t lanes);
  PartitionLanes(const PartitionLanes&) = delete;
  PartitionLanes& operator=(const PartitionLanes&) = delete;

  size_t lanes() const { return lanes_; }
  void ForEach(size_t n, const std::function<void(size_t i, size_t lane)>& fn);

 private:
  const size_t lanes_;
  std::atomic<bool> busy_{false};
  FanOutPool helpers_;  // The caller waits while they run.
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_PARTITION_LANES_H_
