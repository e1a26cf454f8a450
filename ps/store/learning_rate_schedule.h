// Learning rate as a function of the global update count: constant, or a
// linear warmup followed by cosine or linear decay to min_lr_ratio * base.
#ifndef SPOTPS_PS_STORE_LEARNING_RATE_SCHEDULE_H_
#define SPOTPS_PS_STORE_LEARNING_RATE_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

enum class DecayKind { kConstant, kCosine, kLinear };

struct ScheduleConfig {
  double base_lr = 1e-3;
  DecayKind decay = DecayKind::kConstant;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // Decay reaches min_lr_ratio here; needed for decay.
  double min_lr_ratio = 0.0;
};

absl::StatusOr<DecayKind> ParseDecayKind(absl::string_view name);

// Immutable, validated schedule. Promises: At() is pure, never negative, and
// equals base_lr after warmup when decay is kConstant.
class LearningRateSchedule {
 public:
  static absl::StatusOr<LearningRateSchedule> Create(const ScheduleConfig& config);

  // Learning rate for the update that follows `updates_done` earlier ones.
  double At(uint64_t updates_done) const;

  const ScheduleConfig& config() const { return config_; }

 private:
  explicit LearningRateSchedule(const ScheduleConfig& config) : config_(config) {}
  ScheduleConfig config_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_LEARNING_RATE_SCHEDULE_H_
