// Small POSIX file pieces with errors as absl::Status: an owned descriptor,
// complete writes, directory sync and listing. Shared by every file spotps
// writes (atomic files, checkpoints, token files).
#ifndef SPOTPS_COMMON_POSIX_FILE_H_
#define SPOTPS_COMMON_POSIX_FILE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// INTERNAL "<what> <path>: <strerror(errno)>"; call right after the failing
// system call, before anything else can change errno.
absl::Status ErrnoError(absl::string_view what, const std::string& path);

// Owns a file descriptor (closes it on destruction); -1 holds nothing.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();

  int get() const { return fd_; }
  // Closes now, reporting the error close(2) can return for a written file.
  absl::Status Close(const std::string& path);

 private:
  int fd_;
};

// Writes all n bytes (retrying short writes and EINTR, in chunks below
// Linux's 2 GiB per-call limit); `path` only names the file in errors.
absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path);

// fsyncs a directory, so that a rename or unlink in it is durable.
absl::Status SyncDirectory(const std::string& dir);

// The directory part of `path`: "." for a bare name, "/" for "/name".
std::string DirectoryOf(const std::string& path);

// The names (not paths) of the entries in `dir`, in no order. NOT_FOUND if
// `dir` does not exist.
absl::StatusOr<std::vector<std::string>> ListFileNames(const std::string& dir);

}  // namespace spotps

#endif  // SPOTPS_COMMON_POSIX_FILE_H_
