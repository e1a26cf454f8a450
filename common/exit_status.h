// The exit statuses every spotps binary uses, so that a script can tell a
// typo from a sick cluster: 0 success, 1 a runtime failure (the cluster, a
// file, the network), 2 bad usage (flags or arguments).
#ifndef SPOTPS_COMMON_EXIT_STATUS_H_
#define SPOTPS_COMMON_EXIT_STATUS_H_

#include "absl/status/status.h"

namespace spotps {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

// Log `s` through the log sink and return the matching exit status, for
// `return UsageError(s);` in a main.
int UsageError(const absl::Status& s);
int RuntimeError(const absl::Status& s);

}  // namespace spotps

#endif  // SPOTPS_COMMON_EXIT_STATUS_H_
