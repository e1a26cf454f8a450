#include "ps/store/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace spotps {

absl::StatusOr<DecayKind> ParseDecayKind(absl::string_view name) {
  if (name == "constant") return DecayKind::kConstant;
  if (name == "cosine") return DecayKind::kCosine;
  if (name == "linear") return DecayKind::kLinear;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown lr schedule '", name, "' (expected constant, cosine or linear)"));
}

absl::StatusOr<LearningRateSchedule> LearningRateSchedule::Create(const ScheduleConfig& c) {
  if (!(c.base_lr > 0.0) || !std::isfinite(c.base_lr)) {
    return absl::InvalidArgumentError(absl::StrCat("lr must be finite and > 0, got ", c.base_lr));
  }
  if (c.warmup_steps < 0) return absl::InvalidArgumentError("warmup_steps must be >= 0");
  if (!(c.min_lr_ratio >= 0.0 && c.min_lr_ratio <= 1.0)) {
    return absl::InvalidArgumentError("min_lr_ratio must be in [0, 1]");
  }
  if (c.decay != DecayKind::kConstant && c.total_steps <= c.warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a decaying schedule needs total_steps > warmup_steps, got total_steps=", c.total_steps,
        " warmup_steps=", c.warmup_steps));
  }
  return LearningRateSchedule(c);
}

double LearningRateSchedule::At(uint64_t updates_done) const {
  const ScheduleConfig& c = config_;
  const double step = static_cast<double>(updates_done);
  if (step < c.warmup_steps) return c.base_lr * (step + 1) / c.warmup_steps;
  if (c.decay == DecayKind::kConstant) return c.base_lr;
  const double progress =
      std::clamp((step - c.warmup_steps) / (c.total_steps - c.warmup_steps), 0.0, 1.0);
  const double shape =
      c.decay == DecayKind::kCosine ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return c.base_lr * (c.min_lr_ratio + (1.0 - c.min_lr_ratio) * shape);
}

}  // namespace spotps
