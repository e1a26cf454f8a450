// Crash-safe file replacement: readers see the old contents or the new ones,
// never a mix, even if the process or the machine dies mid-write.
#ifndef SPOTPS_CLIENT_ATOMIC_FILE_H_
#define SPOTPS_CLIENT_ATOMIC_FILE_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spotps {

// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Reads a whole file.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace spotps

#endif  // SPOTPS_CLIENT_ATOMIC_FILE_H_
