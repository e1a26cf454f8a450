#include "ps/checkpoint/checkpoint_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "common/little_endian.h"
#include "common/partition_map.h"
#include "common/posix_file.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "float arrays are written as they lie in memory, and the format is little-endian");

namespace spotps {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'O', 'T', 'C', 'K', 'P', 'T'};
constexpr size_t kPrefixBytes = sizeof(kMagic) + 4 + 4;
constexpr size_t kCrcBytes = 4;
constexpr size_t kRecordHeadBytes = 4 + 8 + 8;
constexpr size_t kTrailerBytes = 8 + kCrcBytes;
constexpr int kIdDigits = 20;  // Enough for any uint64_t.
constexpr absl::string_view kSuffix = ".ckpt";
// WriteFileAtomically's temporaries are "<checkpoint name>.tmp.<pid>".
constexpr absl::string_view kTemporaryInfix = ".tmp.";
// read(2) and write(2) move at most about 2 GiB per call on Linux.
constexpr size_t kIoChunkBytes = size_t{1} << 30;
// Small fields and small partitions are gathered into writes of this size;
// larger arrays go to write(2) straight from the caller's memory.
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

// The CRC of the current section and the CRC of the whole file so far, both
// advanced over every byte written or read, in one pass.
struct RunningCrcs {
  uint32_t section = 0;
  uint32_t file = 0;

  void Update(const void* data, size_t n) { Crc32cExtendTwo(&section, &file, data, n); }
};

// Streams a file through a buffer while keeping the CRC of the whole file so
// far and of the current section. The first error sticks and turns later
// appends into no-ops, so callers check once, in Finish.
class ChecksummedWriter {
 public:
  ChecksummedWriter(int fd, const std::string& path) : fd_(fd), path_(path) {
    buffer_.reserve(kWriteBufferBytes);
  }

  void Append(const void* data, size_t n) {
    crcs_.Update(data, n);
    bytes_ += n;
    if (!status_.ok()) return;
    if (buffer_.size() + n > kWriteBufferBytes) Flush();
    if (n >= kWriteBufferBytes) {
      WriteAll(static_cast<const char*>(data), n);
    } else {
      buffer_.append(static_cast<const char*>(data), n);
    }
  }
  void Append(absl::string_view bytes) { Append(bytes.data(), bytes.size()); }
  void AppendFloats(const std::vector<float>& values) {
    Append(values.data(), values.size() * sizeof(float));
  }
  void AppendU32(uint32_t v) {
    char buf[4];
    EncodeU32(buf, v);
    Append(buf, sizeof(buf));
  }
  void AppendU64(uint64_t v) {
    char buf[8];
    EncodeU64(buf, v);
    Append(buf, sizeof(buf));
  }
  // Appends the CRC of the section since the previous EndSection.
  void EndSection() {
    AppendU32(crcs_.section);
    crcs_.section = 0;
  }
  uint64_t bytes() const { return bytes_; }
  uint32_t file_crc() const { return crcs_.file; }

  absl::Status Finish() {
    if (status_.ok()) Flush();
    return status_;
  }

 private:
  void Flush() {
    WriteAll(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void WriteAll(const char* p, size_t n) {
    if (status_.ok()) status_ = spotps::WriteAll(fd_, p, n, path_);
  }

  const int fd_;
  const std::string& path_;
  std::string buffer_;
  uint64_t bytes_ = 0;
  RunningCrcs crcs_;
  absl::Status status_;
};

// Reads a file front to back, up to `end` (where its trailer starts), while
// keeping the CRC of everything read so far and of the current section. It
// never reads past `end`, so remaining() bounds any length the file claims.
class ChecksummedReader {
 public:
  ChecksummedReader(int fd, uint64_t end) : fd_(fd), end_(end) {}

  uint64_t remaining() const { return end_ - offset_; }
  uint32_t file_crc() const { return crcs_.file; }

  absl::Status Read(void* dst, uint64_t n) {
    if (n > remaining()) {
      return absl::DataLossError(absl::StrFormat("truncated: %d bytes needed at offset %d, %d left",
                                                 n, offset_, remaining()));
    }
    char* p = static_cast<char*>(dst);
    for (uint64_t done = 0; done < n;) {
      const ssize_t got = ::pread(fd_, p + done, std::min<uint64_t>(n - done, kIoChunkBytes),
                                  static_cast<off_t>(offset_ + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        return absl::InternalError(absl::StrCat("read failed: ", std::strerror(errno)));
      }
      if (got == 0) return absl::DataLossError("the file shrank while it was read");
      done += static_cast<uint64_t>(got);
    }
    offset_ += n;
    crcs_.Update(dst, n);
    return absl::OkStatus();
  }
  absl::Status ReadFloats(uint64_t n, std::vector<float>* out) {
    out->resize(n);
    return Read(out->data(), n * sizeof(float));
  }

  // Reads a stored CRC and compares it with the CRC of the section read
  // since the previous check; `what` names the section in the error.
  absl::Status CheckSection(absl::string_view what) {
    const uint32_t computed = crcs_.section;
    char stored[kCrcBytes];
    if (absl::Status s = Read(stored, sizeof(stored)); !s.ok()) return s;
    crcs_.section = 0;
    if (DecodeU32(stored) == computed) return absl::OkStatus();
    return absl::DataLossError(absl::StrFormat("%s: checksum mismatch (stored %08x, computed %08x)",
                                               what, DecodeU32(stored), computed));
  }

 private:
  const int fd_;
  const uint64_t end_;
  uint64_t offset_ = 0;
  RunningCrcs crcs_;
};

// ------------------------------------------------------- the format

std::string EncodePrefixAndHeader(uint64_t checkpoint_id, const ShardState& state,
                                  absl::string_view extra_blob) {
  const std::string layout = state.layout.ToProto().SerializeAsString();
  std::string header;
  PutU64(&header, checkpoint_id);
  PutU32(&header, state.shard_index);
  PutU32(&header, state.num_shards);
  PutU64(&header, state.global_step);
  PutU32(&header, static_cast<uint32_t>(state.optimizer_state_slots));
  PutU32(&header, static_cast<uint32_t>(state.partitions.size()));
  PutU32(&header, static_cast<uint32_t>(layout.size()));
  header += layout;
  PutU64(&header, extra_blob.size());
  header.append(extra_blob.data(), extra_blob.size());
  PutU32(&header, static_cast<uint32_t>(state.recent_push_ids.size()));
  for (const std::string& id : state.recent_push_ids) {
    PutU32(&header, static_cast<uint32_t>(id.size()));
    header += id;
  }

  std::string out(kMagic, sizeof(kMagic));
  PutU32(&out, CheckpointDirectory::kFormatVersion);
  PutU32(&out, static_cast<uint32_t>(header.size()));
  return out + header;
}

void AppendCheckpoint(uint64_t checkpoint_id, const ShardState& state, absl::string_view extra_blob,
                      ChecksummedWriter* out) {
  out->Append(EncodePrefixAndHeader(checkpoint_id, state, extra_blob));
  out->EndSection();
  for (const PartitionSnapshot& p : state.partitions) {
    out->AppendU32(p.id);
    out->AppendU64(p.version);
    out->AppendU64(p.weights.size());
    out->AppendFloats(p.weights);
    for (const std::vector<float>& slot : p.optimizer_state) out->AppendFloats(slot);
    out->EndSection();
  }
  const uint64_t file_length = out->bytes() + kTrailerBytes;
  out->AppendU64(file_length);
  out->AppendU32(out->file_crc());  // Covers every byte before this one.
}

// Version 2's push ids: a count, then each as a length and its bytes. False
// if they run past the header; lengths are checked by ValidateShardState.
bool ReadPushIds(FieldCursor* fields, std::vector<std::string>* ids) {
  uint32_t count = 0;
  if (!fields->U32(&count)) return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t length = 0;
    absl::string_view id;
    if (!fields->U32(&length) || !fields->Bytes(length, &id)) return false;
    ids->emplace_back(id);
  }
  return true;
}

// Reads the prefix and header into *out (all but the partitions) and checks
// them against the file name and each other; returns the partition count.
absl::StatusOr<uint32_t> ReadHeader(ChecksummedReader* in, uint64_t expected_id,
                                    uint32_t expected_shard, ShardCheckpoint* out) {
  char prefix[kPrefixBytes];
  if (absl::Status s = in->Read(prefix, sizeof(prefix)); !s.ok()) return s;
  if (std::memcmp(prefix, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a spotps checkpoint (bad magic)");
  }
  const uint32_t version = DecodeU32(prefix + sizeof(kMagic));
  if (version < CheckpointDirectory::kOldestReadableVersion ||
      version > CheckpointDirectory::kFormatVersion) {
    return absl::DataLossError(
        absl::StrFormat("format version %d, this build reads versions %d to %d", version,
                        CheckpointDirectory::kOldestReadableVersion,
                        CheckpointDirectory::kFormatVersion));
  }
  const uint32_t header_length = DecodeU32(prefix + sizeof(kMagic) + 4);
  if (header_length > in->remaining()) {
    return absl::DataLossError(absl::StrFormat("header length %d overruns the %d bytes left",
                                               header_length, in->remaining()));
  }
  std::string header(header_length, '\0');
  if (absl::Status s = in->Read(header.data(), header.size()); !s.ok()) return s;
  if (absl::Status s = in->CheckSection("header"); !s.ok()) return s;

  FieldCursor fields(header);
  uint32_t slots = 0, partition_count = 0, layout_length = 0;
  uint64_t extra_length = 0;
  absl::string_view layout_bytes, extra_blob;
  ShardState& state = out->state;
  if (!fields.U64(&out->id) || !fields.U32(&state.shard_index) || !fields.U32(&state.num_shards) ||
      !fields.U64(&state.global_step) || !fields.U32(&slots) || !fields.U32(&partition_count) ||
      !fields.U32(&layout_length) || !fields.Bytes(layout_length, &layout_bytes) ||
      !fields.U64(&extra_length) || !fields.Bytes(extra_length, &extra_blob) ||
      (version >= 2 && !ReadPushIds(&fields, &state.recent_push_ids)) || !fields.empty()) {
    return absl::DataLossError("header fields do not fill the header length exactly");
  }
  if (out->id != expected_id || state.shard_index != expected_shard) {
    return absl::DataLossError(absl::StrFormat(
        "holds checkpoint %d of shard %d, but its name says checkpoint %d of shard %d", out->id,
        state.shard_index, expected_id, expected_shard));
  }
  if (slots > static_cast<uint32_t>(CheckpointDirectory::kMaxStateSlots)) {
    return absl::DataLossError(absl::StrFormat("%d optimizer state slots, at most %d are allowed",
                                               slots, CheckpointDirectory::kMaxStateSlots));
  }
  state.optimizer_state_slots = static_cast<int>(slots);
  v1::ModelLayout layout_proto;
  if (layout_bytes.size() > INT_MAX ||
      !layout_proto.ParseFromArray(layout_bytes.data(), static_cast<int>(layout_bytes.size()))) {
    return absl::DataLossError("the stored layout does not parse as spotps.v1.ModelLayout");
  }
  absl::StatusOr<ModelLayout> layout = ModelLayout::FromProto(layout_proto);
  if (!layout.ok()) {
    return absl::DataLossError(
        absl::StrCat("the stored layout is invalid: ", layout.status().message()));
  }
  state.layout = *std::move(layout);
  out->extra_blob = std::string(extra_blob);
  return partition_count;
}

// Reads one record, checking its element count against the partition map
// and the bytes left before allocating for it.
absl::Status ReadPartition(ChecksummedReader* in, const PartitionMap& map, const ShardState& state,
                           PartitionSnapshot* out) {
  char head[kRecordHeadBytes];
  if (absl::Status s = in->Read(head, sizeof(head)); !s.ok()) return s;
  out->id = DecodeU32(head);
  out->version = DecodeU64(head + 4);
  const uint64_t n = DecodeU64(head + 12);
  const Partition* p = map.Find(out->id);
  if (p == nullptr || p->shard != state.shard_index) {
    return absl::DataLossError(
        absl::StrFormat("record for partition %d, which shard %d of %d does not own", out->id,
                        state.shard_index, state.num_shards));
  }
  const uint64_t bytes_per_element = sizeof(float) * (1 + state.optimizer_state_slots);
  const uint64_t room =
      in->remaining() < kCrcBytes ? 0 : (in->remaining() - kCrcBytes) / bytes_per_element;
  if (n != static_cast<uint64_t>(p->num_elements) || n > room) {
    return absl::DataLossError(absl::StrFormat(
        "record for partition %d claims %d elements; the layout gives it %d and the file has room "
        "for %d",
        out->id, n, p->num_elements, room));
  }
  if (absl::Status s = in->ReadFloats(n, &out->weights); !s.ok()) return s;
  out->optimizer_state.resize(state.optimizer_state_slots);
  for (std::vector<float>& slot : out->optimizer_state) {
    if (absl::Status s = in->ReadFloats(n, &slot); !s.ok()) return s;
  }
  return in->CheckSection(absl::StrFormat("partition %d", out->id));
}

// Reads the trailer of a file of `file_size` bytes into `trailer` and checks
// the length it records: a truncated file is caught before any other work.
absl::Status ReadTrailer(int fd, uint64_t file_size, char (&trailer)[kTrailerBytes]) {
  if (file_size < kPrefixBytes + kCrcBytes + kTrailerBytes) {
    return absl::DataLossError(
        absl::StrFormat("truncated: only %d bytes, fewer than any checkpoint has", file_size));
  }
  if (::pread(fd, trailer, sizeof(trailer), static_cast<off_t>(file_size - kTrailerBytes)) !=
      static_cast<ssize_t>(sizeof(trailer))) {
    return absl::DataLossError("cannot read the trailer");
  }
  if (DecodeU64(trailer) != file_size) {
    return absl::DataLossError(
        absl::StrFormat("truncated or extended: the file has %d bytes, its trailer says %d",
                        file_size, DecodeU64(trailer)));
  }
  return absl::OkStatus();
}

// Parses and verifies a whole checkpoint file of `file_size` bytes.
absl::StatusOr<ShardCheckpoint> ParseCheckpoint(int fd, uint64_t file_size, uint64_t expected_id,
                                                uint32_t expected_shard) {
  char trailer[kTrailerBytes];
  if (absl::Status s = ReadTrailer(fd, file_size, trailer); !s.ok()) return s;
  ChecksummedReader in(fd, file_size - kTrailerBytes);
  ShardCheckpoint checkpoint;
  absl::StatusOr<uint32_t> partition_count =
      ReadHeader(&in, expected_id, expected_shard, &checkpoint);
  if (!partition_count.ok()) return partition_count.status();
  ShardState& state = checkpoint.state;
  absl::StatusOr<PartitionMap> map = PartitionMap::Create(state.layout, state.num_shards);
  if (!map.ok() || state.shard_index >= state.num_shards) {
    return absl::DataLossError(
        absl::StrFormat("the stored layout does not cut into %d shards", state.num_shards));
  }
  const size_t owned = map->PartitionsOfShard(state.shard_index).size();
  if (*partition_count != owned) {
    return absl::DataLossError(absl::StrFormat("%d partition records, shard %d owns %d",
                                               *partition_count, state.shard_index, owned));
  }
  state.partitions.resize(owned);
  for (PartitionSnapshot& partition : state.partitions) {
    if (absl::Status s = ReadPartition(&in, *map, state, &partition); !s.ok()) return s;
  }
  if (in.remaining() != 0) {
    return absl::DataLossError(
        absl::StrFormat("%d unexpected bytes after the last partition", in.remaining()));
  }
  const uint32_t file_crc = Crc32cExtend(in.file_crc(), trailer, 8);
  if (file_crc != DecodeU32(trailer + 8)) {
    return absl::DataLossError(
        absl::StrFormat("whole-file checksum mismatch (stored %08x, computed %08x)",
                        DecodeU32(trailer + 8), file_crc));
  }
  if (absl::Status s = ValidateShardState(state); !s.ok()) {
    return absl::DataLossError(absl::StrCat("inconsistent state: ", s.message()));
  }
  return checkpoint;
}

// Opens `path` and returns parse(fd, file size), its errors prefixed with
// the path.
template <typename T, typename Parse>
absl::StatusOr<T> ParseFile(const std::string& path, Parse parse) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no checkpoint file ", path));
    return ErrnoError("cannot open", path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("cannot stat", path);
  absl::StatusOr<T> parsed = parse(fd.get(), static_cast<uint64_t>(st.st_size));
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat(path, ": ", parsed.status().message()));
  }
  return parsed;
}

// True for "<prefix><20 digits>.ckpt", setting *id.
bool ParseCheckpointName(absl::string_view name, absl::string_view prefix, uint64_t* id) {
  if (!absl::ConsumePrefix(&name, prefix) || !absl::ConsumeSuffix(&name, kSuffix) ||
      name.size() != kIdDigits) {
    return false;
  }
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, id);
}

}  // namespace

CheckpointDirectory::CheckpointDirectory(std::string directory, uint32_t shard_index, int keep_last)
    : directory_(std::move(directory)),
      shard_index_(shard_index),
      keep_last_(keep_last),
      name_prefix_(absl::StrCat("shard-", shard_index, "-")) {}

absl::StatusOr<CheckpointDirectory> CheckpointDirectory::Open(std::string directory,
                                                              uint32_t shard_index, int keep_last) {
  if (directory.empty()) return absl::InvalidArgumentError("checkpoint directory is empty");
  if (keep_last < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("keep_last must be at least 1, got %d", keep_last));
  }
  if (shard_index >= PartitionMap::kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shard_index %d is not below the %d shards a model can have", shard_index,
                        PartitionMap::kMaxShards));
  }
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint directory ", directory, ": ", ec.message()));
  }
  return CheckpointDirectory(std::move(directory), shard_index, keep_last);
}

std::string CheckpointDirectory::PathOf(uint64_t checkpoint_id) const {
  return absl::StrFormat("%s/%s%0*d%s", directory_, name_prefix_, kIdDigits, checkpoint_id,
                         kSuffix);
}

absl::Status CheckpointDirectory::Write(uint64_t checkpoint_id, const ShardState& state,
                                        absl::string_view extra_blob) {
  if (state.shard_index != shard_index_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state of shard %d given to the checkpoints of shard %d", state.shard_index, shard_index_));
  }
  if (state.optimizer_state_slots > kMaxStateSlots) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d optimizer state slots, the format holds at most %d",
                        state.optimizer_state_slots, kMaxStateSlots));
  }
  if (extra_blob.size() > kMaxExtraBlobBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "extra blob of %d bytes, at most %d are allowed", extra_blob.size(), kMaxExtraBlobBytes));
  }
  if (absl::Status s = ValidateShardState(state); !s.ok()) return s;

  absl::Status written =
      WriteFileAtomicallyWith(PathOf(checkpoint_id), [&](int fd, const std::string& tmp_path) {
        ChecksummedWriter out(fd, tmp_path);
        AppendCheckpoint(checkpoint_id, state, extra_blob, &out);
        return out.Finish();
      });
  if (!written.ok()) return written;
  return Prune(checkpoint_id);
}

absl::Status CheckpointDirectory::Prune(uint64_t written_id) const {
  absl::StatusOr<std::vector<std::string>> names = ListFileNames(directory_);
  if (!names.ok()) return names.status();
  std::vector<uint64_t> older;
  std::vector<std::string> doomed;
  for (const std::string& name : *names) {
    uint64_t id;
    if (ParseCheckpointName(name, name_prefix_, &id)) {
      if (id < written_id) older.push_back(id);
    } else if (absl::StartsWith(name, name_prefix_) &&
               absl::StrContains(name, absl::StrCat(kSuffix, kTemporaryInfix))) {
      doomed.push_back(absl::StrCat(directory_, "/", name));  // Left by a crashed writer.
    }
  }
  std::sort(older.begin(), older.end(), std::greater<uint64_t>());
  for (size_t i = static_cast<size_t>(keep_last_ - 1); i < older.size(); ++i) {
    doomed.push_back(PathOf(older[i]));
  }
  for (const std::string& path : doomed) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoError("checkpoint written, but cannot delete the old file", path);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardCheckpoint> CheckpointDirectory::Read(uint64_t checkpoint_id) const {
  return ParseFile<ShardCheckpoint>(PathOf(checkpoint_id), [&](int fd, uint64_t size) {
    return ParseCheckpoint(fd, size, checkpoint_id, shard_index_);
  });
}

absl::StatusOr<std::string> CheckpointDirectory::ReadExtraBlob(uint64_t checkpoint_id) const {
  return ParseFile<std::string>(
      PathOf(checkpoint_id), [&](int fd, uint64_t size) -> absl::StatusOr<std::string> {
        char trailer[kTrailerBytes];
        if (absl::Status s = ReadTrailer(fd, size, trailer); !s.ok()) return s;
        ChecksummedReader in(fd, size - kTrailerBytes);
        ShardCheckpoint header_only;
        absl::StatusOr<uint32_t> read = ReadHeader(&in, checkpoint_id, shard_index_, &header_only);
        if (!read.ok()) return read.status();
        return std::move(header_only.extra_blob);
      });
}

absl::StatusOr<ShardCheckpoint> CheckpointDirectory::ReadNewest() const {
  absl::StatusOr<std::vector<uint64_t>> ids = ListIds();
  if (!ids.ok()) return ids.status();
  std::vector<std::string> skipped;
  for (auto id = ids->rbegin(); id != ids->rend(); ++id) {
    absl::StatusOr<ShardCheckpoint> checkpoint = Read(*id);
    if (checkpoint.ok()) {
      checkpoint->skipped = std::move(skipped);
      return checkpoint;
    }
    skipped.emplace_back(checkpoint.status().message());
  }
  return absl::NotFoundError(absl::StrCat(
      "no intact checkpoint of shard ", shard_index_, " in ", directory_,
      skipped.empty() ? "" : absl::StrCat(" (skipped: ", absl::StrJoin(skipped, "; "), ")")));
}

absl::StatusOr<std::vector<uint64_t>> CheckpointDirectory::ListIds() const {
  absl::StatusOr<std::vector<std::string>> names = ListFileNames(directory_);
  if (!names.ok()) return names.status();
  std::vector<uint64_t> ids;
  for (const std::string& name : *names) {
    uint64_t id;
    if (ParseCheckpointName(name, name_prefix_, &id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace spotps
