// BackwardPush: sends a step's gradient partition by partition while
// backward is still running, the way DDP buckets its all-reduce.
//
// Backward produces gradients last layer first. A hook on each trained
// parameter's gradient accumulator reports when its gradient is final; once
// every parameter overlapping a partition has reported, a sender thread
// copies the partition into the flat gradient and hands it to the push
// stream (GradientStream), so the transfer and the shards' decoding run
// while the earlier layers' gradients are still being computed.
//
// Clipping needs the global norm, known only when the last gradient is in:
// the partitions go out unclipped, the sender adds up their squares, and
// the clipping factor travels last, as the push's gradient_scale. The
// shard's update uses gradient * scale, the same numbers clip_grad_norm_
// produces up to BF16 rounding.
#ifndef SPOTPS_TRAINER_ELASTIC_BACKWARD_PUSH_H_
#define SPOTPS_TRAINER_ELASTIC_BACKWARD_PUSH_H_

#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/cluster.h"
#include "common/partition_map.h"
#include "trainer/model/parameter_binding.h"

namespace spotps {

// Owns the hooks on the binding's parameters (removed on destruction) and
// the sender thread. Promises: between Begin and End every partition is
// sent exactly once, with the values GatherGradients would produce; the
// hooks only queue work, so backward itself is not slowed by the copies.
// Begin/End from one thread (the training thread).
class BackwardPush {
 public:
  // Borrows `binding` and `map` (the cluster's), which must outlive it.
  BackwardPush(const ParameterBinding& binding, const PartitionMap& map);
  ~BackwardPush();
  BackwardPush(const BackwardPush&) = delete;
  BackwardPush& operator=(const BackwardPush&) = delete;

  // Arms the hooks for the next backward: each partition goes to `stream`
  // once complete, its values into `gradient` (the whole flat space).
  void Begin(GradientStream* stream, absl::Span<float> gradient);
  // After backward (whether or not it succeeded): waits for the sender,
  // gathers and sends the partitions backward left incomplete (a parameter
  // without a gradient counts as zeros), disarms, and returns the
  // gradient's squared L2 norm.
  double End();

 private:
  void OnGradientReady(size_t parameter);
  void SenderLoop();
  // Copies parameter i's gradient and sends the partitions it completes.
  void Take(size_t i);

  const ParameterBinding& binding_;
  const PartitionMap& map_;
  // By parameter: the partitions it overlaps. By partition: how many
  // parameters overlap it.
  std::vector<std::vector<uint32_t>> partitions_of_;
  std::vector<int> overlap_count_;
  // The accumulators are held so that they (and their hooks) live on.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  // This step's, valid between Begin and End.
  GradientStream* stream_ = nullptr;
  absl::Span<float> gradient_;
  std::vector<int> missing_;  // By partition: parameters still to come.
  std::vector<char> taken_;   // By parameter.
  double squares_ = 0;

  absl::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // The sender is in Take.
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<size_t> ready_ ABSL_GUARDED_BY(mu_);
  std::thread sender_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_BACKWARD_PUSH_H_
