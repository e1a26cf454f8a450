#include "trainer/data/token_file.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/little_endian.h"
#include "trainer/data/fnv1a.h"
#include "trainer/data/framed_file.h"

namespace spotps {
namespace {

constexpr absl::string_view kMagic = "SPTOKENS";
constexpr absl::string_view kWhat = "token file";
constexpr uint32_t kLargestUint16Vocabulary = uint32_t{1} << 16;
constexpr size_t kVersion1HeaderBytes = 40;
// Bounding the counts keeps the size arithmetic from overflowing.
constexpr uint64_t kMaxTokens = uint64_t{1} << 60;

template <int kBytes>
uint32_t LargestId(absl::Span<const uint8_t> payload) {
  uint32_t largest = 0;
  const int64_t count = static_cast<int64_t>(payload.size() / kBytes);
  for (int64_t i = 0; i < count; ++i) largest = std::max(largest, TokenIdAt<kBytes>(payload.data(), i));
  return largest;
}

uint32_t LargestId(absl::Span<const uint8_t> payload, uint32_t token_bytes) {
  return token_bytes == 2 ? LargestId<2>(payload) : LargestId<4>(payload);
}

absl::Status ValidateTokens(absl::Span<const uint32_t> tokens, uint32_t vocab_size,
                            double val_fraction) {
  if (vocab_size == 0) return absl::InvalidArgumentError("vocab_size must be positive");
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("val_fraction must be in [0, 1), got ", val_fraction));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token ", tokens[i], " at position ", i,
                                                     " is not below vocab_size ", vocab_size));
    }
  }
  return absl::OkStatus();
}

std::string EncodeFields(const TokenFileHeader& header) {
  std::string fields;
  PutTokenizerIdentity(header.tokenizer, &fields);
  PutU32(&fields, header.token_bytes);
  PutU32(&fields, header.max_token_id);
  PutU64(&fields, header.num_train_tokens);
  PutU64(&fields, header.num_val_tokens);
  return fields;
}

absl::Status CheckPayloadSize(const TokenFileHeader& header, absl::Span<const uint8_t> payload) {
  if (header.num_train_tokens > kMaxTokens || header.num_val_tokens > kMaxTokens) {
    return absl::DataLossError("token file header has absurd token counts");
  }
  const uint64_t expected = (header.num_train_tokens + header.num_val_tokens) * header.token_bytes;
  if (payload.size() == expected) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "token file size mismatch: header promises ", expected, " payload bytes (",
      header.num_train_tokens, " train + ", header.num_val_tokens, " validation tokens of ",
      header.token_bytes, " bytes), file has ", payload.size(),
      payload.size() < expected ? " (truncated)" : ""));
}

// Checks that the payload's largest id is the header's (version 1 records
// none: there the payload's sets it) and within the vocabulary.
absl::Status CheckIds(TokenFileHeader& header, absl::Span<const uint8_t> payload) {
  const uint32_t largest = LargestId(payload, header.token_bytes);
  if (header.version == 1) header.max_token_id = largest;
  if (largest != header.max_token_id) {
    return absl::DataLossError(absl::StrCat("token file is corrupt: its largest id is ", largest,
                                            ", its header says ", header.max_token_id));
  }
  if (header.max_token_id >= header.tokenizer.vocab_size) {
    return absl::DataLossError(absl::StrCat("token file holds id ", header.max_token_id,
                                            ", outside its vocabulary of ",
                                            header.tokenizer.vocab_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenFileHeader> ParseVersion1(absl::Span<const uint8_t> file) {
  if (file.size() < kVersion1HeaderBytes) {
    return absl::DataLossError(absl::StrCat("token file truncated: ", file.size(),
                                            " bytes, shorter than its ", kVersion1HeaderBytes,
                                            "-byte header"));
  }
  const char* p = reinterpret_cast<const char*>(file.data());
  TokenFileHeader header;
  header.version = 1;
  header.tokenizer.kind = TokenizerKind::kByte;
  header.tokenizer.vocab_size = DecodeU32(p + 12);
  header.num_train_tokens = DecodeU64(p + 16);
  header.num_val_tokens = DecodeU64(p + 24);
  header.payload_checksum = DecodeU64(p + 32);
  header.payload_offset = kVersion1HeaderBytes;
  const absl::Span<const uint8_t> payload = file.subspan(kVersion1HeaderBytes);
  if (header.tokenizer.vocab_size == 0 || header.tokenizer.vocab_size > kLargestUint16Vocabulary) {
    return absl::DataLossError(absl::StrCat("token file header has impossible vocab_size ",
                                            header.tokenizer.vocab_size));
  }
  if (absl::Status status = CheckPayloadSize(header, payload); !status.ok()) return status;
  if (absl::Status status = CheckPayloadChecksum(payload, header.payload_checksum, kWhat);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckIds(header, payload); !status.ok()) return status;
  return header;
}

absl::StatusOr<TokenFileHeader> ParseVersion2(absl::Span<const uint8_t> file) {
  absl::StatusOr<Frame> frame = ParseFrame(file, kMagic, kTokenFileVersion, kWhat);
  if (!frame.ok()) return frame.status();
  TokenFileHeader header;
  header.version = kTokenFileVersion;
  header.payload_checksum = frame->payload_checksum;
  header.payload_offset = frame->payload_offset;
  FieldCursor cursor(frame->fields);
  if (absl::Status status = TakeTokenizerIdentity(cursor, kWhat, &header.tokenizer);
      !status.ok()) {
    return status;
  }
  if (!cursor.U32(&header.token_bytes) || !cursor.U32(&header.max_token_id) ||
      !cursor.U64(&header.num_train_tokens) || !cursor.U64(&header.num_val_tokens)) {
    return absl::DataLossError("token file header is cut short");
  }
  if (header.token_bytes != TokenIdBytes(header.tokenizer.vocab_size)) {
    return absl::DataLossError(absl::StrCat("token file stores ids in ", header.token_bytes,
                                            " bytes, not the ",
                                            TokenIdBytes(header.tokenizer.vocab_size),
                                            " its vocabulary of ", header.tokenizer.vocab_size,
                                            " takes"));
  }
  if (absl::Status status = CheckPayloadSize(header, frame->payload); !status.ok()) return status;
  if (absl::Status status = CheckIds(header, frame->payload); !status.ok()) return status;
  return header;
}

absl::StatusOr<TokenFileHeader> ParseRawU16(absl::Span<const uint8_t> file) {
  if (file.size() % 2 != 0) {
    return absl::DataLossError(absl::StrCat("raw_u16 token file has an odd size, ", file.size(),
                                            " bytes: not whole uint16 ids (truncated?)"));
  }
  TokenFileHeader header;
  header.version = 0;
  header.tokenizer.kind = TokenizerKind::kUnknown;
  header.tokenizer.vocab_size = kLargestUint16Vocabulary;
  header.token_bytes = 2;
  const uint64_t count = file.size() / 2;
  header.num_val_tokens =
      static_cast<uint64_t>(std::floor(kRawU16ValidationFraction * static_cast<double>(count)));
  header.num_train_tokens = count - header.num_val_tokens;
  header.max_token_id = LargestId(file, 2);
  return header;
}

}  // namespace

uint32_t TokenIdBytes(uint32_t vocab_size) {
  return vocab_size <= kLargestUint16Vocabulary ? 2 : 4;
}

void AppendTokenIds(absl::Span<const uint32_t> ids, uint32_t token_bytes, std::string* out) {
  const size_t start = out->size();
  out->resize(start + ids.size() * token_bytes);
  char* p = &(*out)[start];
  for (uint32_t id : ids) {
    for (uint32_t b = 0; b < token_bytes; ++b) *p++ = static_cast<char>(id >> (8 * b));
  }
}

absl::StatusOr<TokenFileFormat> ParseTokenFileFormat(absl::string_view name) {
  if (name == "spotps") return TokenFileFormat::kSpotps;
  if (name == "raw_u16") return TokenFileFormat::kRawU16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown token file format \"", name, "\" (expected spotps or raw_u16)"));
}

absl::StatusOr<TokenFileHeader> WriteTokenFile(const std::string& path,
                                               absl::Span<const uint32_t> tokens,
                                               const TokenizerIdentity& tokenizer,
                                               double val_fraction) {
  if (absl::Status status = ValidateTokens(tokens, tokenizer.vocab_size, val_fraction);
      !status.ok()) {
    return status;
  }
  TokenFileHeader header;
  header.tokenizer = tokenizer;
  header.token_bytes = TokenIdBytes(tokenizer.vocab_size);
  header.max_token_id = tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end());
  header.num_val_tokens = static_cast<uint64_t>(std::floor(val_fraction * double(tokens.size())));
  header.num_train_tokens = tokens.size() - header.num_val_tokens;
  std::string payload;
  AppendTokenIds(tokens, header.token_bytes, &payload);
  header.payload_checksum = Fnv1a64(payload);
  const std::string fields = EncodeFields(header);
  header.payload_offset = FrameHeaderBytes(fields.size());
  if (absl::Status status = WriteFramedFile(path, kMagic, kTokenFileVersion, fields, payload);
      !status.ok()) {
    return status;
  }
  return header;
}

absl::StatusOr<TokenFileHeader> ParseTokenFile(absl::Span<const uint8_t> file,
                                               TokenFileFormat format) {
  if (format == TokenFileFormat::kRawU16) return ParseRawU16(file);
  if (HasMagic(file, kMagic) && file.size() >= 12 &&
      DecodeU32(reinterpret_cast<const char*>(file.data()) + 8) == 1) {
    return ParseVersion1(file);
  }
  return ParseVersion2(file);
}

absl::Status CheckTokenFileFitsModel(const std::string& path, const TokenFileHeader& header,
                                     int64_t model_vocab_size) {
  if (header.max_token_id < model_vocab_size) return absl::OkStatus();
  const std::string made_by =
      header.version == 0 ? "raw_u16 file"
                          : absl::StrCat(TokenizerKindName(header.tokenizer.kind), " tokenizer");
  return absl::InvalidArgumentError(absl::StrCat(
      "token file ", path, " holds ids up to ", header.max_token_id, " (", made_by,
      "), but the model's vocabulary has ", model_vocab_size, " entries"));
}

}  // namespace spotps
