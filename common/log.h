// The one sink for what library code tells the people running it. Each line
// goes out whole, prefixed with the program's name ("spotps-ps: ..."), so
// lines from many processes sharing a terminal or log file stay apart.
#ifndef SPOTPS_COMMON_LOG_H_
#define SPOTPS_COMMON_LOG_H_

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace spotps {

// Names the program in every line; main() calls it first. Default "spotps".
void SetLogProgramName(absl::string_view name);
std::string LogProgramName();

// Progress and events, on stdout (flushed, so piped logs stay current).
void LogInfo(absl::string_view message);
// Problems the program survives, on stderr.
void LogWarning(absl::string_view message);

// `t` as "14:03:07.251 UTC": lines about one event in several processes'
// logs (a shard's and a trainer's) can be put in order.
std::string ClockTime(absl::Time t);

template <typename... Args>
void LogInfoF(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogInfo(absl::StrFormat(format, args...));
}
template <typename... Args>
void LogWarningF(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogWarning(absl::StrFormat(format, args...));
}

}  // namespace spotps

#endif  // SPOTPS_COMMON_LOG_H_
