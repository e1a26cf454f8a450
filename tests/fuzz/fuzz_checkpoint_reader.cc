// libFuzzer target: a shard restores from whatever file lies in its
// checkpoint directory. Any bytes must be refused with DATA_LOSS (or read
// back as a state that validates and writes back identically), never crash
// or allocate past the file's own size.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "ps/checkpoint/checkpoint_directory.h"

namespace {

const std::string& Directory() {
  static const std::string* dir = [] {
    auto* d = new std::string(absl::StrCat(std::filesystem::temp_directory_path().string(),
                                           "/spotps-fuzz-ckpt.", getpid()));
    std::filesystem::create_directories(*d);
    // libFuzzer ends a run with exit(): leave no directory behind.
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(Directory(), ignored);
    });
    return d;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<spotps::CheckpointDirectory> files =
      spotps::CheckpointDirectory::Open(Directory(), 0, 2);
  if (!files.ok()) std::abort();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!spotps::WriteFileAtomically(files->PathOf(1), bytes).ok()) std::abort();
  absl::StatusOr<spotps::ShardCheckpoint> read = files->Read(1);
  absl::StatusOr<std::string> extra = files->ReadExtraBlob(1);
  if (!read.ok()) {
    if (!absl::IsDataLoss(read.status())) std::abort();
    return 0;
  }
  if (!extra.ok() || *extra != read->extra_blob) std::abort();
  if (!spotps::ValidateShardState(read->state).ok()) std::abort();
  // An intact file says exactly one thing: writing it back gives it again.
  if (!files->Write(2, read->state, read->extra_blob).ok()) std::abort();
  absl::StatusOr<spotps::ShardCheckpoint> again = files->Read(2);
  if (!again.ok() || again->state.recent_push_ids != read->state.recent_push_ids ||
      again->state.partitions.size() != read->state.partitions.size()) {
    std::abort();
  }
  return 0;
}
