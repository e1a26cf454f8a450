// Crash-safe file replacement: readers see the old contents or the new ones,
// never a mix, even if the process or the machine dies mid-write.
#ifndef SPOTPS_COMMON_ATOMIC_FILE_H_
#define SPOTPS_COMMON_ATOMIC_FILE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// Writes `contents` to "<path>.tmp.<pid>", fsyncs it, renames it over `path`
// and fsyncs the directory. On failure `path` is untouched and the temporary
// file is removed.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// The same for contents produced by `write`, which gets the temporary file's
// descriptor and path and writes everything (e.g. with WriteAll) before
// returning OK; any error it returns abandons the file.
absl::Status WriteFileAtomicallyWith(
    const std::string& path, const std::function<absl::Status(int fd, const std::string&)>& write);

// The name WriteFileAtomically* gives its temporary files: "<path>.tmp.<pid>".
std::string TemporaryPathFor(const std::string& path);

// Reads a whole file. NOT_FOUND if it cannot be opened.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace spotps

#endif  // SPOTPS_COMMON_ATOMIC_FILE_H_
