// Bounds the coordinator and its trainers agree on: the coordinator checks
// its flags against them, a trainer the coordinator's answers.
#ifndef SPOTPS_COMMON_WORK_LIMITS_H_
#define SPOTPS_COMMON_WORK_LIMITS_H_

#include <cstdint>

namespace spotps {

// The most units one local-mode round may hold (--consistency=local:H).
inline constexpr uint32_t kMaxLocalSteps = 100000;

}  // namespace spotps

#endif  // SPOTPS_COMMON_WORK_LIMITS_H_
