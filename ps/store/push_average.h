// PushAverage: async gradients a shard holds between their arrival and the
// one averaged update they join (--staleness_method=...+avg, +fresh).
#ifndef SPOTPS_PS_STORE_PUSH_AVERAGE_H_
#define SPOTPS_PS_STORE_PUSH_AVERAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ps/store/payload_range.h"
#include "ps/store/round_buffer.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

// Owns a copy of each push held since the last Take (as sync rounds hold
// theirs: the averaging itself waits for the update, when trainers wait
// too), with each partition's contribution count and summed base versions,
// and what counts toward the update's k: each push's worker, and stand-ins
// for workers whose push was applied before (AddStandIn).
// Promises: a held push is in exactly one Batch; an element's mean counts
// only the pushes that carried that element, and an element no push
// carried is not part of the update at all. Not thread-safe: the
// ShardStore serializes access.
//
// Why per element, and not the sum divided by all k pushes: a push that
// leaves an element out says nothing about it (a head being fine-tuned, a
// service updating some tensors), it does not say "zero gradient". So an
// averaged update moves exactly the elements some push carried, each by
// the mean of what was pushed for it, as applying the pushes one by one
// would (staleness method `none`) up to the averaging itself; dense
// trainers, which carry every element, get the plain mean of k.
class PushAverage {
 public:
  // Elements [begin, end) of a partition.
  struct ElementRun {
    int64_t begin = 0;
    int64_t end = 0;
  };

  struct Batch {
    std::vector<RoundBuffer::Gradient> gradients;  // In arrival order.
    std::vector<uint32_t> counts;                  // By partition id: pushes that carried it.
    std::vector<uint64_t> base_sum;                // Their base versions, summed.
    std::vector<std::string> push_ids;             // In arrival order.

    // Writes the mean of the held gradients for each element of partition
    // `id` (n elements) that at least one of them carried into out, and
    // returns those elements as ascending, disjoint runs; the other
    // elements of out are left at 0.
    std::vector<ElementRun> MeanInto(uint32_t id, int64_t n, float* out) const;
  };

  explicit PushAverage(size_t num_partitions);

  // Adds one validated push (owned partitions, in bounds, no overlaps) by
  // `worker` (empty: unnamed): its ranges' base versions and `copy`,
  // RoundBuffer::Copy of the ranges (made by the caller, outside its lock).
  void Add(absl::string_view push_id, absl::string_view worker,
           const std::vector<PayloadRange>& ranges, RoundBuffer::Gradient copy, absl::Time now);
  // Counts `worker` (not empty) toward the update without a gradient: its
  // push was a duplicate of one already applied (AveragedUpdates says when).
  void AddStandIn(absl::string_view worker, absl::Time now);
  // The held gradients.
  size_t pushes() const { return held_.push_ids.size(); }
  // Whether nothing is held, not even a stand-in.
  bool empty() const { return contributions_.empty(); }
  // The held pushes and stand-ins that count toward their update's k: all
  // but those of workers named to StopCounting since they were added.
  size_t counted_pushes() const { return counted_; }
  // Whether a held push or stand-in of `worker` counts.
  bool Counts(absl::string_view worker) const;
  // The held pushes and stand-ins of `worker` (not empty) no longer count;
  // they stay held.
  void StopCounting(absl::string_view worker);
  // The named workers whose held pushes or stand-ins count, in arrival
  // order.
  std::vector<std::string> counted_workers() const;
  // Arrival of the oldest held push (InfiniteFuture when none is held).
  absl::Time oldest() const { return oldest_; }
  bool Holds(absl::string_view push_id) const;
  // Hands over everything held and starts empty again.
  Batch Take();

 private:
  Batch Empty() const;

  const size_t num_partitions_;
  Batch held_;
  // What counts toward the update's k: a held push or a stand-in.
  struct Contribution {
    std::string worker;  // Empty: an unnamed client's push.
    bool counts = true;
  };
  // Adds one contribution of `worker`, arrived at `now`.
  void Contribute(absl::string_view worker, absl::Time now);

  std::vector<Contribution> contributions_;  // In arrival order.
  size_t counted_ = 0;
  absl::Time oldest_ = absl::InfiniteFuture();
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_PUSH_AVERAGE_H_
