#include "trainer/data/framed_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/little_endian.h"
#include "common/posix_file.h"
#include "trainer/data/fnv1a.h"

namespace spotps {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kHeaderChecksumOffset = 32;

// The header's checksum, computed as if its own field were zero.
uint64_t HeaderChecksum(absl::string_view header) {
  const char zeros[8] = {};
  uint64_t hash = Fnv1a64(header.substr(0, kHeaderChecksumOffset));
  hash = Fnv1a64(absl::string_view(zeros, sizeof(zeros)), hash);
  return Fnv1a64(header.substr(kHeaderChecksumOffset + 8), hash);
}

absl::string_view AsChars(absl::Span<const uint8_t> bytes) {
  return absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

size_t FrameHeaderBytes(size_t fields_bytes) { return (kFramePrefixBytes + fields_bytes + 7) / 8 * 8; }

absl::Status WriteFramedFile(const std::string& path, absl::string_view magic, uint32_t version,
                             absl::string_view fields, absl::string_view payload) {
  if (magic.size() != kMagicBytes) {
    return absl::InternalError(absl::StrCat("file magic must be 8 bytes, got \"", magic, "\""));
  }
  const size_t header_bytes = FrameHeaderBytes(fields.size());
  if (header_bytes > kMaxFrameHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header of ", header_bytes, " bytes is over the limit of ",
                     kMaxFrameHeaderBytes));
  }
  std::string header(magic);
  PutU32(&header, version);
  PutU32(&header, static_cast<uint32_t>(header_bytes));
  PutU64(&header, payload.size());
  PutU64(&header, Fnv1a64(payload));
  PutU64(&header, 0);  // The header checksum, filled in below.
  header.append(fields.data(), fields.size());
  header.resize(header_bytes, '\0');
  EncodeU64(&header[kHeaderChecksumOffset], HeaderChecksum(header));
  return WriteFileAtomicallyWith(path, [&](int fd, const std::string& temporary_path) {
    if (absl::Status status = WriteAll(fd, header.data(), header.size(), temporary_path);
        !status.ok()) {
      return status;
    }
    return WriteAll(fd, payload.data(), payload.size(), temporary_path);
  });
}

bool HasMagic(absl::Span<const uint8_t> file, absl::string_view magic) {
  return file.size() >= magic.size() && std::memcmp(file.data(), magic.data(), magic.size()) == 0;
}

absl::Status CheckPayloadChecksum(absl::Span<const uint8_t> payload, uint64_t recorded,
                                  absl::string_view what) {
  const uint64_t checksum = Fnv1a64(payload);
  if (checksum == recorded) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, " payload is corrupt: checksum ",
                                          absl::Hex(checksum), " != header's ",
                                          absl::Hex(recorded)));
}

absl::StatusOr<Frame> ParseFrame(absl::Span<const uint8_t> file, absl::string_view magic,
                                 uint32_t version, absl::string_view what) {
  if (!HasMagic(file, magic)) {
    if (file.size() < magic.size()) {
      return absl::DataLossError(
          absl::StrCat(what, " truncated: ", file.size(), " bytes, shorter than its magic"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("not a ", what, " (bad magic; expected \"", magic, "\")"));
  }
  if (file.size() < kFramePrefixBytes) {
    return absl::DataLossError(absl::StrCat(what, " truncated: ", file.size(),
                                            " bytes, shorter than its ", kFramePrefixBytes,
                                            "-byte header"));
  }
  const absl::string_view image = AsChars(file);
  Frame frame;
  const uint32_t file_version = DecodeU32(image.data() + 8);
  if (file_version != version) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported ", what, " version ",
                                                   file_version, " (this build reads version ",
                                                   version, ")"));
  }
  const uint64_t header_bytes = DecodeU32(image.data() + 12);
  const uint64_t payload_bytes = DecodeU64(image.data() + 16);
  frame.payload_checksum = DecodeU64(image.data() + 24);
  const uint64_t header_checksum = DecodeU64(image.data() + kHeaderChecksumOffset);
  if (header_bytes < kFramePrefixBytes || header_bytes > kMaxFrameHeaderBytes ||
      header_bytes % 8 != 0) {
    return absl::DataLossError(
        absl::StrCat(what, " header is corrupt: impossible header size ", header_bytes));
  }
  if (file.size() < header_bytes) {
    return absl::DataLossError(absl::StrCat(what, " truncated: ", file.size(),
                                            " bytes, shorter than its ", header_bytes,
                                            "-byte header"));
  }
  const uint64_t computed_header_checksum = HeaderChecksum(image.substr(0, header_bytes));
  if (computed_header_checksum != header_checksum) {
    return absl::DataLossError(absl::StrCat(what, " header is corrupt: checksum ",
                                            absl::Hex(computed_header_checksum),
                                            " != recorded ", absl::Hex(header_checksum)));
  }
  if (file.size() - header_bytes != payload_bytes) {
    return absl::DataLossError(absl::StrCat(
        what, " size mismatch: header promises ", header_bytes, " + ", payload_bytes,
        " bytes, file has ", file.size(),
        file.size() - header_bytes < payload_bytes ? " (truncated)" : " (trailing bytes)"));
  }
  frame.fields = image.substr(kFramePrefixBytes, header_bytes - kFramePrefixBytes);
  frame.payload = file.subspan(header_bytes);
  frame.payload_offset = header_bytes;
  if (absl::Status status = CheckPayloadChecksum(frame.payload, frame.payload_checksum, what);
      !status.ok()) {
    return status;
  }
  return frame;
}

}  // namespace spotps
