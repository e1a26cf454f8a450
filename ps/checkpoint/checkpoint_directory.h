// CheckpointDirectory: one shard's checkpoints in a directory, each written
// atomically and read back only if every checksum and length agrees.
//
// File names: shard-<shard index>-<checkpoint id as 20 digits>.ckpt, so that
// names sort like ids. A file being written is <name>.tmp.<pid> until it is
// complete, synced and renamed.
//
// File format, version 2 (version 1 lacks the push ids and is still read). Integers are unsigned little-endian (u32, u64);
// floats are IEEE-754 binary32, little-endian; every CRC is CRC-32C
// (Castagnoli, as in iSCSI and ext4), stored as a u32.
//
//   prefix    8 bytes  magic "SPOTCKPT"
//             u32      format version (1)
//             u32      header length H: the bytes of the header fields below
//   header    u64      checkpoint id (must match the file name)
//   (H bytes) u32      shard index (must match the file name)
//             u32      num_shards
//             u64      global_step
//             u32      optimizer state slots S (at most kMaxStateSlots)
//             u32      partition count P
//             u32      layout length L, then L bytes: serialized spotps.v1.ModelLayout
//             u64      extra length E, then E bytes: the caller's extra blob
//             u32      push id count C (v2), then C times: u32 length L, L bytes
//             u32      CRC of the prefix and the header
//   P records u32      partition id
//             u64      partition version
//             u64      element count N
//             N floats weights, then S arrays of N floats: optimizer state
//             u32      CRC of the record
//   trailer   u64      file length, trailer included
//             u32      CRC of every byte of the file before this one
//
// The reader checks the trailer's file length first (a truncated file fails
// at once), and checks the partition count and each element count against
// the partition map of the stored layout and against the bytes left in the
// file before it allocates anything for them, so a corrupt or hostile file
// can make it allocate at most about the file's own size.
#ifndef SPOTPS_PS_CHECKPOINT_CHECKPOINT_DIRECTORY_H_
#define SPOTPS_PS_CHECKPOINT_CHECKPOINT_DIRECTORY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps/store/shard_store.h"

namespace spotps {

// One checkpoint as read back from its file.
struct ShardCheckpoint {
  uint64_t id = 0;
  ShardState state;
  std::string extra_blob;
  // From ReadNewest only: the newer files it passed over, each as
  // "<path>: <what is wrong>", newest first.
  std::vector<std::string> skipped;
};

// Owns the checkpoint files of one shard in one directory (other shards may
// share the directory; their files are never touched). Promises: a file
// under a checkpoint name is always complete and synced, a reader returns
// only checkpoints whose every checksum matches, and Write keeps the newest
// keep_last checkpoints up to the one it wrote. One writer per shard at a time.
class CheckpointDirectory {
 public:
  static constexpr uint32_t kFormatVersion = 2;
  // Version 1 files (without push ids) are still read.
  static constexpr uint32_t kOldestReadableVersion = 1;
  static constexpr int kMaxStateSlots = 8;
  static constexpr size_t kMaxExtraBlobBytes = size_t{1} << 30;

  // Creates `directory` if it does not exist. keep_last must be >= 1.
  static absl::StatusOr<CheckpointDirectory> Open(std::string directory, uint32_t shard_index,
                                                  int keep_last);

  // Writes checkpoint `checkpoint_id` (replacing a file of the same id) into
  // a temporary file, syncs it, renames it into place and syncs the
  // directory. Then deletes this shard's checkpoints with lower ids except
  // the keep_last - 1 newest of them, and temporaries left by crashed
  // writers; checkpoints with higher ids are left alone, as the caller owns
  // the id sequence. `extra_blob` is stored as opaque bytes. INVALID_ARGUMENT
  // if `state` is of another shard, fails ValidateShardState, has more than
  // kMaxStateSlots slots, or extra_blob exceeds kMaxExtraBlobBytes.
  absl::Status Write(uint64_t checkpoint_id, const ShardState& state, absl::string_view extra_blob);

  // Reads and verifies one checkpoint (checksums, lengths, ValidateShardState).
  // NOT_FOUND if there is no such file; DATA_LOSS, saying what is wrong, if it
  // is truncated, corrupt or inconsistent.
  absl::StatusOr<ShardCheckpoint> Read(uint64_t checkpoint_id) const;

  // Only the extra blob of one checkpoint, read from its header (whose
  // checksum is verified) without reading the partitions.
  absl::StatusOr<std::string> ReadExtraBlob(uint64_t checkpoint_id) const;

  // The newest checkpoint that reads back intact; the ones skipped on the way
  // are listed in `skipped`. NOT_FOUND, listing them, if there is none.
  absl::StatusOr<ShardCheckpoint> ReadNewest() const;

  // Ids of this shard's checkpoint files, ascending; their contents are not
  // checked.
  absl::StatusOr<std::vector<uint64_t>> ListIds() const;

  std::string PathOf(uint64_t checkpoint_id) const;
  const std::string& directory() const { return directory_; }
  uint32_t shard_index() const { return shard_index_; }
  int keep_last() const { return keep_last_; }

 private:
  CheckpointDirectory(std::string directory, uint32_t shard_index, int keep_last);

  // Deletes what Write promises to delete after writing `written_id`.
  absl::Status Prune(uint64_t written_id) const;

  std::string directory_;
  uint32_t shard_index_;
  int keep_last_;
  std::string name_prefix_;  // "shard-<index>-".
};

}  // namespace spotps

#endif  // SPOTPS_PS_CHECKPOINT_CHECKPOINT_DIRECTORY_H_
