// How `spotps-ctl` shows a StatusReport: aligned plain-text tables for
// people, or one JSON object (keys in a fixed order) for scripts.
#ifndef SPOTPS_TOOLS_CTL_STATUS_FORMAT_H_
#define SPOTPS_TOOLS_CTL_STATUS_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "spotps/v1/coordinator.pb.h"
#include "tools/ctl/cluster_status.h"

namespace spotps {

// Shards, throughput, warnings and the coordinator's epochs and workers.
std::string StatusText(const StatusReport& r);
// The same as one JSON object and a newline.
std::string StatusJson(const StatusReport& r);

// "<label>: epoch=E/N committed=C/U (P%) workers=W elapsed_s=S" and a newline.
std::string ProgressLine(absl::string_view label, const v1::ProgressResponse& p,
                         absl::Duration elapsed);

}  // namespace spotps

#endif  // SPOTPS_TOOLS_CTL_STATUS_FORMAT_H_
