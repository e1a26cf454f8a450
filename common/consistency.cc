#include "common/consistency.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/work_limits.h"

namespace spotps {

absl::StatusOr<Consistency> ParseConsistency(absl::string_view mode) {
  if (mode == "async") return Consistency{v1::CONSISTENCY_ASYNC, 0};
  if (mode == "sync") return Consistency{v1::CONSISTENCY_SYNC, 0};
  int64_t bound = -1;
  absl::string_view rest = mode;
  if (absl::ConsumePrefix(&rest, "ssp:") && absl::SimpleAtoi(rest, &bound) && bound >= 0) {
    return Consistency{v1::CONSISTENCY_SSP, bound};
  }
  rest = mode;
  int64_t steps = 0;
  if (absl::ConsumePrefix(&rest, "local:") && absl::SimpleAtoi(rest, &steps) && steps >= 1 &&
      steps <= static_cast<int64_t>(kMaxLocalSteps)) {
    return Consistency{v1::CONSISTENCY_LOCAL, 0, steps};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--consistency must be async, sync, ssp:S with S >= 0 or local:H with 1 <= H <= ",
      kMaxLocalSteps, ", got '", mode, "'"));
}

std::string ConsistencyName(const Consistency& c) {
  switch (c.mode) {
    case v1::CONSISTENCY_SSP:
      return absl::StrCat("ssp:", c.ssp_bound);
    case v1::CONSISTENCY_SYNC:
      return "sync";
    case v1::CONSISTENCY_LOCAL:
      return absl::StrCat("local:", c.local_steps);
    default:
      return "async";
  }
}

}  // namespace spotps
