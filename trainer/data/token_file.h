// On-disk format of a tokenized corpus. Text is tokenized once, written
// with WriteTokenFile(), and memory-mapped by every trainer afterwards.
//
// Version 2 (written now) is a framed file (framed_file.h) with magic
// "SPTOKENS" and these header fields, little-endian:
//   tokenizer          see PutTokenizerIdentity: kind, vocab_size,
//                      vocabulary hash, model file name
//   token_bytes        uint32: 2 (uint16 ids) when vocab_size <= 65536,
//                      else 4 (uint32 ids)
//   max_token_id       uint32: the largest id in the payload (0 if none)
//   num_train_tokens   uint64
//   num_val_tokens     uint64
// The payload is the train ids, then the validation ids.
//
// Version 1 (still read): magic, version 1 (uint32), vocab_size (uint32),
// num_train_tokens, num_val_tokens, FNV-1a 64 of the payload (uint64 each),
// then uint16 byte-level ids from offset 40.
//
// raw_u16 files (nanoGPT's train.bin) are a bare array of little-endian
// uint16 ids, no header; their last kRawU16ValidationFraction is the
// validation split.

#ifndef SPOTPS_TRAINER_DATA_TOKEN_FILE_H_
#define SPOTPS_TRAINER_DATA_TOKEN_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/tokenizer_identity.h"

namespace spotps {

inline constexpr uint32_t kTokenFileVersion = 2;
inline constexpr double kRawU16ValidationFraction = 0.05;

enum class TokenFileFormat {
  kSpotps,  // Written by spotps-tokenize (either version).
  kRawU16,  // A headerless array of uint16 ids.
};

// "spotps" or "raw_u16" (the trainer's --data_format); InvalidArgument
// for anything else.
absl::StatusOr<TokenFileFormat> ParseTokenFileFormat(absl::string_view name);

// What a token file holds; the payload starts at payload_offset.
struct TokenFileHeader {
  uint32_t version = kTokenFileVersion;  // 0 for raw_u16.
  TokenizerIdentity tokenizer;           // kind kUnknown for raw_u16.
  uint32_t token_bytes = 2;
  uint32_t max_token_id = 0;
  uint64_t num_train_tokens = 0;
  uint64_t num_val_tokens = 0;
  uint64_t payload_checksum = 0;  // FNV-1a 64; 0 for raw_u16.
  uint64_t payload_offset = 0;
};

// Splits `tokens` into train and validation (the last
// floor(val_fraction * size) tokens) and writes them to `path` atomically
// (write, fsync, rename) as a version 2 file, ids as uint16 when the
// vocabulary allows. Every token must be < tokenizer.vocab_size and
// val_fraction in [0, 1). Returns the header written.
absl::StatusOr<TokenFileHeader> WriteTokenFile(const std::string& path,
                                               absl::Span<const uint32_t> tokens,
                                               const TokenizerIdentity& tokenizer,
                                               double val_fraction);

// Decodes and checks the whole file image `file` in `format`: DataLoss,
// saying what is wrong, for a truncated or oversized file, a corrupt header
// or payload, or ids outside what the header promises; InvalidArgument for
// a file that is not a token file or has an unsupported version.
absl::StatusOr<TokenFileHeader> ParseTokenFile(absl::Span<const uint8_t> file,
                                               TokenFileFormat format = TokenFileFormat::kSpotps);

// OK if every id in the file is below model_vocab_size; otherwise
// InvalidArgument naming the file, e.g. "kjv.gpt2.tokens holds ids up to
// 50256 (gpt2 tokenizer), but the model's vocabulary has 256 entries".
absl::Status CheckTokenFileFitsModel(const std::string& path, const TokenFileHeader& header,
                                     int64_t model_vocab_size);

// How many bytes each id takes in files made with a vocabulary of
// `vocab_size`: 2 up to 65536, else 4.
uint32_t TokenIdBytes(uint32_t vocab_size);

// Appends `ids` as `token_bytes`-byte (2 or 4) little-endian integers.
void AppendTokenIds(absl::Span<const uint32_t> ids, uint32_t token_bytes, std::string* out);

// The index-th id of a payload of kBytes-byte (2 or 4) little-endian ids.
template <int kBytes>
inline uint32_t TokenIdAt(const uint8_t* ids, int64_t index) {
  const uint8_t* p = ids + index * kBytes;
  if constexpr (kBytes == 2) {
    return p[0] | (uint32_t{p[1]} << 8);
  } else {
    return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
  }
}

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TOKEN_FILE_H_
