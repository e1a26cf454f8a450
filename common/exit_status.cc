#include "common/exit_status.h"

#include "common/log.h"

namespace spotps {

int UsageError(const absl::Status& s) {
  LogWarning(s.ToString());
  return kExitUsageError;
}

int RuntimeError(const absl::Status& s) {
  LogWarning(s.ToString());
  return kExitRuntimeError;
}

}  // namespace spotps
