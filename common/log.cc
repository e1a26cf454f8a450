#include "common/log.h"

#include <cstdio>
#include <string>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace spotps {
namespace {

ABSL_CONST_INIT absl::Mutex name_mu(absl::kConstInit);
std::string* program_name ABSL_GUARDED_BY(name_mu) = nullptr;

void WriteLine(std::FILE* out, absl::string_view message) {
  std::string line;
  {
    absl::MutexLock lock(&name_mu);
    line = absl::StrCat(program_name == nullptr ? "spotps" : *program_name, ": ", message, "\n");
  }
  // One fwrite per line: stdio locks the stream, so concurrent lines do not
  // interleave.
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace

void SetLogProgramName(absl::string_view name) {
  absl::MutexLock lock(&name_mu);
  delete program_name;
  program_name = new std::string(name);
}

std::string LogProgramName() {
  absl::MutexLock lock(&name_mu);
  return program_name == nullptr ? "spotps" : *program_name;
}

std::string ClockTime(absl::Time t) {
  return absl::FormatTime("%H:%M:%E3S UTC", t, absl::UTCTimeZone());
}

void LogInfo(absl::string_view message) { WriteLine(stdout, message); }

void LogWarning(absl::string_view message) { WriteLine(stderr, message); }

}  // namespace spotps
