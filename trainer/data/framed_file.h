// The frame shared by spotps' checksummed data files (token files from
// version 2 on, labeled-example files): a fixed prefix, the format's own
// header fields, then the payload. All integers little-endian:
//   offset  0  magic              8 bytes, names the format
//   offset  8  version            uint32, the format's version
//   offset 12  header_bytes       uint32, where the payload starts: 40 plus
//                                 the fields, rounded up to a multiple of 8
//   offset 16  payload_bytes      uint64
//   offset 24  payload_checksum   uint64, FNV-1a 64 of the payload
//   offset 32  header_checksum    uint64, FNV-1a 64 of the header_bytes
//                                 first bytes with this field zeroed
//   offset 40  fields, then zero padding up to header_bytes
//   offset header_bytes: the payload

#ifndef SPOTPS_TRAINER_DATA_FRAMED_FILE_H_
#define SPOTPS_TRAINER_DATA_FRAMED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spotps {

inline constexpr size_t kFramePrefixBytes = 40;
// A header larger than this is taken for corruption.
inline constexpr size_t kMaxFrameHeaderBytes = size_t{16} << 20;

// A checked file image: its version, header fields and payload, pointing
// into the image.
struct Frame {
  absl::string_view fields;  // With the zero padding.
  absl::Span<const uint8_t> payload;
  uint64_t payload_offset = 0;  // header_bytes.
  uint64_t payload_checksum = 0;
};

// The header size, and so the payload's offset, of a frame with
// `fields_bytes` bytes of fields.
size_t FrameHeaderBytes(size_t fields_bytes);

// Writes magic, fields and payload as one framed file to `path`, atomically
// (write, fsync, rename).
absl::Status WriteFramedFile(const std::string& path, absl::string_view magic, uint32_t version,
                             absl::string_view fields, absl::string_view payload);

// True if `file` starts with `magic`.
bool HasMagic(absl::Span<const uint8_t> file, absl::string_view magic);

// Checks the frame of the whole image `file`: InvalidArgument if it does
// not start with `magic` ("not a <what>") or has another version than
// `version`; DataLoss, saying what is wrong, for a truncated or oversized
// file, a header or payload whose checksum does not match, or impossible
// sizes.
absl::StatusOr<Frame> ParseFrame(absl::Span<const uint8_t> file, absl::string_view magic,
                                 uint32_t version, absl::string_view what);

// DataLoss naming `what` unless the FNV-1a 64 of `payload` is `recorded`.
absl::Status CheckPayloadChecksum(absl::Span<const uint8_t> payload, uint64_t recorded,
                                  absl::string_view what);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_FRAMED_FILE_H_
