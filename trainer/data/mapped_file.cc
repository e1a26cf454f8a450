#include "trainer/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spotps {

absl::StatusOr<ReadOnlyMappedFile> ReadOnlyMappedFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("fstat ", path));
  }
  const size_t size = static_cast<size_t>(info.st_size);
  // mmap rejects zero-length mappings; an empty file is just no bytes.
  void* data = nullptr;
  if (size > 0) {
    data = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  close(fd);  // The mapping keeps the file referenced.
  if (data == MAP_FAILED) {
    return absl::ErrnoToStatus(error, absl::StrCat("mmap ", path));
  }
  return ReadOnlyMappedFile(path, static_cast<const uint8_t*>(data), size);
}

ReadOnlyMappedFile::ReadOnlyMappedFile(std::string path, const uint8_t* data, size_t size)
    : path_(std::move(path)), data_(data), size_(size) {}

ReadOnlyMappedFile::ReadOnlyMappedFile(ReadOnlyMappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ReadOnlyMappedFile& ReadOnlyMappedFile::operator=(ReadOnlyMappedFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ReadOnlyMappedFile::~ReadOnlyMappedFile() { Unmap(); }

void ReadOnlyMappedFile::Unmap() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace spotps
