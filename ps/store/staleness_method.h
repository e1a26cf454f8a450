// StalenessMethod: how a shard in async mode treats a gradient computed on
// weights that other pushes have moved since (staleness = versions applied
// between the pull and the push).
#ifndef SPOTPS_PS_STORE_STALENESS_METHOD_H_
#define SPOTPS_PS_STORE_STALENESS_METHOD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

enum class StalenessMethod {
  kNone,     // Apply every gradient as it is, with the full step size.
  kLrScale,  // Zhang et al. 2016: step size lr / (1 + staleness).
  // Zheng et al. 2017 (DC-ASGD, adaptive form) under AdamW: the gradient is
  // moved to the current weights with a diagonal curvature estimate,
  // g + lambda * g*g / sqrt(v_hat) * (w_now - w_base) / lr, where
  // w_now - w_base is estimated as staleness times the partition's last
  // AdamW update (read back from m and v, so no weight history is kept).
  // Dividing by lr makes lambda scale-free: at lambda = 1 a gradient
  // aligned with the last update changes by up to staleness times itself.
  kDelayCompensated,
};

struct StalenessConfig {
  StalenessMethod method = StalenessMethod::kNone;
  float dc_lambda = 1.0f;  // kDelayCompensated's lambda (finite, >= 0).
};

// "none", "lr" or "dc"; INVALID_ARGUMENT otherwise.
absl::StatusOr<StalenessMethod> ParseStalenessMethod(absl::string_view name);
std::string StalenessMethodName(StalenessMethod method);
// A one-word description for logs and start lines, e.g. "dc(lambda=1)".
std::string DescribeStaleness(const StalenessConfig& config);
absl::Status ValidateStalenessConfig(const StalenessConfig& config, bool adamw);

// How one push of `staleness` is applied: the step size, and the factor the
// optimizer multiplies its delay compensation by (0: none).
struct StalenessStep {
  double lr = 0;
  float compensation = 0.0f;
};
StalenessStep PlanStalenessStep(const StalenessConfig& config, double lr, uint64_t staleness);

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_STALENESS_METHOD_H_
