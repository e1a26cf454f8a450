// Which floating-point format the trainer's matrix multiplications use, and a
// scope that applies that choice to LibTorch's CPU autocast.

#ifndef SPOTPS_TRAINER_RUNTIME_COMPUTE_PRECISION_H_
#define SPOTPS_TRAINER_RUNTIME_COMPUTE_PRECISION_H_

#include <c10/core/ScalarType.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// Precision of the compute (matmul) path. Parameters, gradients, the
// residual stream and the loss stay FP32 in both modes.
enum class ComputeDType { kBF16, kFP32 };

// "bf16" or "fp32", as used on command lines and in the runtime line.
absl::string_view ComputeDTypeName(ComputeDType dtype);

// Parses ComputeDTypeName()'s output; anything else is InvalidArgument.
absl::StatusOr<ComputeDType> ParseComputeDType(absl::string_view name);

// Enables CPU autocast to BF16 (kBF16) or disables it (kFP32) on the calling
// thread for the scope's lifetime, then restores the previous state.
// Autocast caches BF16 copies of FP32 weights; the scope clears that cache
// on exit, so open one scope per training step (forward, loss, backward).
class ComputePrecisionScope {
 public:
  explicit ComputePrecisionScope(ComputeDType dtype);
  ~ComputePrecisionScope();

  ComputePrecisionScope(const ComputePrecisionScope&) = delete;
  ComputePrecisionScope& operator=(const ComputePrecisionScope&) = delete;

 private:
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_COMPUTE_PRECISION_H_
