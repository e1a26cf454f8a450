// PushAverage: async gradients a shard holds between their arrival and the
// one averaged update they join (--staleness_method=...+avg).
#ifndef SPOTPS_PS_STORE_PUSH_AVERAGE_H_
#define SPOTPS_PS_STORE_PUSH_AVERAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ps/store/payload_range.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

// Owns running FP32 sums per partition of the pushes held since the last
// Take, with each partition's contribution count and summed base versions.
// Promises: a held push is in exactly one Batch; a partition's mean counts
// only the pushes that carried it (elements a push did not carry count as
// zero gradient). Not thread-safe: the ShardStore serializes access.
class PushAverage {
 public:
  struct Batch {
    std::vector<std::vector<float>> sums;  // By partition id; empty if none held.
    std::vector<uint32_t> counts;          // Pushes that carried the partition.
    std::vector<uint64_t> base_sum;        // Their base versions, summed.
    std::vector<std::string> push_ids;     // In arrival order.
  };

  // `partition_sizes[id]`: elements of partition id (0 where not owned).
  explicit PushAverage(std::vector<int64_t> partition_sizes);

  // Adds one validated push (owned partitions, in bounds, no overlaps).
  void Add(absl::string_view push_id, v1::DType dtype, const std::vector<PayloadRange>& ranges,
           absl::Time now);
  size_t pushes() const { return held_.push_ids.size(); }
  // Arrival of the oldest held push (InfiniteFuture when none is held).
  absl::Time oldest() const { return oldest_; }
  bool Holds(absl::string_view push_id) const;
  // Hands over everything held and starts empty again.
  Batch Take();

 private:
  const std::vector<int64_t> sizes_;
  Batch held_;
  absl::Time oldest_ = absl::InfiniteFuture();
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_PUSH_AVERAGE_H_
