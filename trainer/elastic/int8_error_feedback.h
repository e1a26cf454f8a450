// Int8ErrorFeedback: what a trainer's int8 pushes could not carry, added to
// its next push (error feedback, as in EF-SGD), so that nothing of a
// gradient is lost to rounding, only delayed.
#ifndef SPOTPS_TRAINER_ELASTIC_INT8_ERROR_FEEDBACK_H_
#define SPOTPS_TRAINER_ELASTIC_INT8_ERROR_FEEDBACK_H_

#include <vector>

#include "absl/types/span.h"
#include "common/partition_map.h"

namespace spotps {

// Owns the residual: one FP32 per parameter, lost with the trainer (a
// preempted trainer's residual never reaches the shards). Promises: over
// any run of pushes, the shards receive the sum of the gradients minus the
// residual held at the end, exactly up to FP32 rounding, provided each push
// is whole and cut at the partitions' int8 blocks (Cluster::Push does).
class Int8ErrorFeedback {
 public:
  // `map` must outlive this.
  explicit Int8ErrorFeedback(const PartitionMap& map);

  // gradient += residual; residual = gradient - what int8 carries of it
  // (RoundTripInt8Blocks per partition). `gradient` spans the flat space.
  void Compensate(absl::Span<float> gradient);

  // The residual's L2 norm, for logs and tests.
  double ResidualNorm() const;

 private:
  const PartitionMap& map_;
  std::vector<float> residual_;
  std::vector<float> carried_;  // One partition's decoded values.
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_INT8_ERROR_FEEDBACK_H_
