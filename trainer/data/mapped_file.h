// Read-only memory mapping of a whole file.

#ifndef SPOTPS_TRAINER_DATA_MAPPED_FILE_H_
#define SPOTPS_TRAINER_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace spotps {

// Owns one read-only, shared mapping of a file's contents as they were when
// opened. bytes() stays valid, at the same address, until destruction, also
// across moves. Pages load on demand, so mapping a large file is cheap.
class ReadOnlyMappedFile {
 public:
  static absl::StatusOr<ReadOnlyMappedFile> Open(const std::string& path);

  ReadOnlyMappedFile(ReadOnlyMappedFile&& other) noexcept;
  ReadOnlyMappedFile& operator=(ReadOnlyMappedFile&& other) noexcept;
  ~ReadOnlyMappedFile();

  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  ReadOnlyMappedFile(std::string path, const uint8_t* data, size_t size);
  void Unmap();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_MAPPED_FILE_H_
