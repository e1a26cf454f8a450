// InnerAdamW: the optimizer a trainer applies to its own copy of the
// weights between pushes in local mode (--consistency=local:H).
#ifndef SPOTPS_TRAINER_ELASTIC_INNER_ADAMW_H_
#define SPOTPS_TRAINER_ELASTIC_INNER_ADAMW_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace spotps {

struct InnerAdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // Decoupled, as torch.optim.AdamW.
};

// Owns AdamW's moments for one flat parameter space. Promises: Step is
// torch.optim.AdamW's update (bias-corrected, decoupled weight decay) in
// FP32. The moments live in the trainer and go with it: a preempted
// trainer's replacement starts them from zero.
class InnerAdamW {
 public:
  InnerAdamW(size_t num_elements, const InnerAdamWOptions& options);

  // weights -= the update for `gradient`; both hold num_elements values.
  void Step(absl::Span<float> weights, absl::Span<const float> gradient);
  int64_t steps() const { return steps_; }

 private:
  const InnerAdamWOptions options_;
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_INNER_ADAMW_H_
