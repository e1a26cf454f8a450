#include "ps/store/partition_lanes.h"

#include <algorithm>
#include <thread>

#include "common/tensor_codec.h"

namespace spotps {
namespace {

size_t LaneCount(size_t asked) {
  if (asked > 0) return asked;
  const size_t cores = std::thread::hardware_concurrency();
  return std::clamp<size_t>(cores, 1, 8);
}

}  // namespace

// The lanes are the parallelism: a conversion on one (tensor_codec) starts no
// OpenMP team of its own.
PartitionLanes::PartitionLanes(size_t lanes)
    : lanes_(LaneCount(lanes)), helpers_([] { UseSingleThreadedConversion(); }) {}

void PartitionLanes::ForEach(size_t n, const std::function<void(size_t i, size_t lane)>& fn) {
  const size_t lanes = std::min(n, lanes_);
  if (lanes <= 1 || busy_.exchange(true, std::memory_order_acquire)) {
    for (size_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  // Each lane takes the lowest index nobody has taken, so the partitions
  // finish roughly in order however their sizes differ.
  std::atomic<size_t> next{0};
  helpers_
      .Run(lanes,
           [&](size_t lane) {
             for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i, lane);
             return absl::OkStatus();
           })
      .IgnoreError();  // Every call returns OK.
  busy_.store(false, std::memory_order_release);
}

}  // namespace spotps
