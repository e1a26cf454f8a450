#include "ps/store/staleness_method.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace spotps {

absl::StatusOr<StalenessMethod> ParseStalenessMethod(absl::string_view name) {
  if (name == "none") return StalenessMethod::kNone;
  if (name == "lr") return StalenessMethod::kLrScale;
  if (name == "dc") return StalenessMethod::kDelayCompensated;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown staleness method '", name, "' (expected none, lr or dc)"));
}

std::string StalenessMethodName(StalenessMethod method) {
  switch (method) {
    case StalenessMethod::kNone:
      return "none";
    case StalenessMethod::kLrScale:
      return "lr";
    case StalenessMethod::kDelayCompensated:
      return "dc";
  }
  return "unknown";
}

std::string DescribeStaleness(const StalenessConfig& config) {
  if (config.method != StalenessMethod::kDelayCompensated) {
    return StalenessMethodName(config.method);
  }
  return absl::StrCat("dc(lambda=", config.dc_lambda, ")");
}

absl::Status ValidateStalenessConfig(const StalenessConfig& config, bool adamw) {
  if (!std::isfinite(config.dc_lambda) || config.dc_lambda < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("dc_lambda must be finite and >= 0, got ", config.dc_lambda));
  }
  if (config.method == StalenessMethod::kDelayCompensated && !adamw) {
    return absl::InvalidArgumentError(
        "--staleness_method=dc needs --optimizer=adamw: it reads the last update back from "
        "AdamW's moments");
  }
  return absl::OkStatus();
}

StalenessStep PlanStalenessStep(const StalenessConfig& config, double lr, uint64_t staleness) {
  StalenessStep step;
  step.lr = lr;
  switch (config.method) {
    case StalenessMethod::kNone:
      break;
    case StalenessMethod::kLrScale:
      step.lr = lr / (1.0 + static_cast<double>(staleness));
      break;
    case StalenessMethod::kDelayCompensated:
      step.compensation = config.dc_lambda * static_cast<float>(staleness);
      break;
  }
  return step;
}

}  // namespace spotps
