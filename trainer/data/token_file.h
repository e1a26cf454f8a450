// On-disk format of a tokenized corpus. Text is tokenized once, written
// with WriteTokenFile(), and memory-mapped by every trainer afterwards.
//
// Layout, all integers little-endian:
//   offset  0  magic "SPTOKENS"          8 bytes
//   offset  8  version (1)               uint32
//   offset 12  vocab_size                uint32
//   offset 16  num_train_tokens          uint64
//   offset 24  num_val_tokens            uint64
//   offset 32  payload checksum          uint64, FNV-1a 64 of the payload
//   offset 40  payload: the train tokens, then the validation tokens,
//              each a uint16

#ifndef SPOTPS_TRAINER_DATA_TOKEN_FILE_H_
#define SPOTPS_TRAINER_DATA_TOKEN_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace spotps {

inline constexpr size_t kTokenFileHeaderBytes = 40;
inline constexpr size_t kTokenFileBytesPerToken = 2;

// The header of a token file; the payload follows it.
struct TokenFileHeader {
  uint32_t version = 1;
  uint32_t vocab_size = 0;
  uint64_t num_train_tokens = 0;
  uint64_t num_val_tokens = 0;
  uint64_t payload_checksum = 0;
};

// Splits `tokens` into train and validation (the last
// floor(val_fraction * size) tokens) and writes them to `path` atomically
// (see WriteFileAtomically). Every token must be < vocab_size <= 65536 and
// val_fraction in [0, 1). Returns the header written.
absl::StatusOr<TokenFileHeader> WriteTokenFile(const std::string& path,
                                               absl::Span<const uint16_t> tokens,
                                               uint32_t vocab_size, double val_fraction);

// Decodes and checks the header against the whole file image `file`:
// DataLoss for a truncated or oversized file or a payload whose checksum
// does not match, InvalidArgument for a file that is not a token file or has
// an unsupported version.
absl::StatusOr<TokenFileHeader> ParseTokenFile(absl::Span<const uint8_t> file);

// FNV-1a, 64-bit: simple, streaming, and plenty to catch torn or flipped
// bytes (it is no defence against deliberate tampering).
uint64_t TokenPayloadChecksum(absl::Span<const uint8_t> payload);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TOKEN_FILE_H_
