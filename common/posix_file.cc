#include "common/posix_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

// read(2) and write(2) move at most about 2 GiB per call on Linux.
constexpr size_t kIoChunkBytes = size_t{1} << 30;

}  // namespace

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ScopedFd::Close(const std::string& path) {
  const int fd = fd_;
  fd_ = -1;
  return ::close(fd) == 0 ? absl::OkStatus() : ErrnoError("cannot close", path);
}

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < n;) {
    const ssize_t wrote = ::write(fd, p + done, std::min(n - done, kIoChunkBytes));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return ErrnoError("cannot write", path);
    done += static_cast<size_t>(wrote);
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoError("cannot sync directory", dir);
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::StatusOr<std::vector<std::string>> ListFileNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec == std::errc::no_such_file_or_directory) {
    return absl::NotFoundError(absl::StrCat("directory ", dir, " does not exist"));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  return names;
}

}  // namespace spotps
