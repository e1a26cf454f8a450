#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/posix_file.h"

namespace spotps {

std::string TemporaryPathFor(const std::string& path) {
  return absl::StrCat(path, ".tmp.", getpid());
}

absl::Status WriteFileAtomicallyWith(
    const std::string& path, const std::function<absl::Status(int fd, const std::string&)>& write) {
  const std::string tmp = TemporaryPathFor(path);
  ScopedFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("cannot create", tmp);
  absl::Status s = write(fd.get(), tmp);
  if (s.ok() && ::fsync(fd.get()) != 0) s = ErrnoError("cannot sync", tmp);
  if (s.ok()) s = fd.Close(tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = ErrnoError("cannot rename into", path);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDirectory(DirectoryOf(path));
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  return WriteFileAtomicallyWith(path, [&](int fd, const std::string& tmp) {
    return WriteAll(fd, contents.data(), contents.size(), tmp);
  });
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace spotps
