// Server-side optimizers over FP32 master weights with FP32 state. The math
// follows torch::optim::SGD and torch::optim::AdamW exactly (same operation
// order), so a shard and a plain LibTorch loop agree on the same gradients.
#ifndef SPOTPS_PS_STORE_OPTIMIZER_H_
#define SPOTPS_PS_STORE_OPTIMIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

enum class OptimizerKind { kSgd, kAdamW };

// The largest gradient element a shard takes. Beyond sqrt(FLT_MAX) ~ 1.8e19
// AdamW's g*g overflows FP32 and leaves a second moment of Inf that freezes
// the weight for good, and repeated huge SGD steps drive weights to Inf;
// below this bound no optimizer state can leave the finite range in any
// realistic number of steps. No trained model's gradient comes near it.
inline constexpr float kMaxGradientMagnitude = 1e18f;

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;
  float weight_decay = 0.0f;  // SGD: L2 added to the gradient. AdamW: decoupled.
  // SGD.
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
  // Delayed Nesterov (Liu et al. 2024, asynchronous local SGD): updates
  // apply their gradient at once, but the momentum buffer takes the sum of
  // the gradients since its last step only on MomentumPhase::kApplyDeferred
  // updates. Needs momentum, Nesterov and dampening 0; a second state slot
  // holds that sum.
  bool delayed_momentum = false;
  // AdamW.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);
// "adamw", "sgd", or with momentum "sgd(momentum=0.9,nesterov)": for logs.
std::string DescribeOptimizer(const OptimizerConfig& config);
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

// How an update treats SGD's momentum: every update steps it (torch's SGD),
// or, with delayed_momentum, most updates only add their gradient to the
// deferred sum and every k-th steps the buffer with it.
enum class MomentumPhase { kEveryUpdate, kDefer, kApplyDeferred };

// Raw little-endian gradient elements as they arrived on the wire; the
// kernels decode BF16 on the fly instead of in a separate pass.
struct GradientView {
  v1::DType dtype = v1::DTYPE_FP32;
  const void* data = nullptr;
  float scale = 1.0f;  // The update uses each element times this.
};

// Stateless rule for one update of a contiguous run of parameters. Promises:
// reads only the given arrays and is safe to call on disjoint runs from
// several threads at once.
class Optimizer {
 public:
  explicit Optimizer(const OptimizerConfig& config) : config_(config) {}

  // FP32 state arrays per parameter: AdamW 2 (m, v), SGD with momentum 1,
  // SGD with delayed momentum 2 (the buffer and the deferred sum).
  int state_slots() const;

  // Updates params[0, n) with `state` (state_slots() arrays of n floats).
  // `step` is this update's 1-based count for these parameters: AdamW's bias
  // correction uses it, and SGD's momentum buffer starts at step 1.
  // `compensation` > 0 (AdamW only): delay-compensate the gradient by this
  // factor (lambda * staleness; see staleness_method.h) before the update.
  // `beta1` >= 0: this update's momentum instead of the configured one
  // (AdamW's beta1, bias correction included, or SGD's momentum once its
  // buffer exists; staleness_method.h's kMomentum). `phase`: with
  // delayed_momentum, kDefer or kApplyDeferred (kEveryUpdate is taken as
  // kApplyDeferred); ignored otherwise. `round_share` < 1 (SGD with
  // momentum): the update is that share of a round, and steps the momentum
  // by that share only (optimizer.cc's SgdShareKernel says how).
  void Apply(float* params, float* const* state, const GradientView& grad, int64_t n, float lr,
             uint64_t step, float compensation = 0.0f, float beta1 = -1.0f,
             MomentumPhase phase = MomentumPhase::kEveryUpdate, float round_share = 1.0f) const;

  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_OPTIMIZER_H_
