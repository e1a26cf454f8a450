// Consistency: how trainers are paced (spotps-ps --consistency), and its
// spelling, shared by the coordinator that runs it and the tools that show it.
#ifndef SPOTPS_COMMON_CONSISTENCY_H_
#define SPOTPS_COMMON_CONSISTENCY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spotps/v1/coordinator.pb.h"

namespace spotps {

struct Consistency {
  v1::Consistency mode = v1::CONSISTENCY_ASYNC;
  // SSP: a worker may be at most this many units ahead of the slowest live one.
  int64_t ssp_bound = 0;
  // Local: units a worker trains with its own optimizer per push (H).
  int64_t local_steps = 0;
};

// "async", "ssp:S" (S >= 0), "sync" or "local:H" (1 <= H <= kMaxLocalSteps).
absl::StatusOr<Consistency> ParseConsistency(absl::string_view mode);
// The mode as ParseConsistency takes it: "ssp:8", "local:16".
std::string ConsistencyName(const Consistency& c);

}  // namespace spotps

#endif  // SPOTPS_COMMON_CONSISTENCY_H_
