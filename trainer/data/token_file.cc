#include "trainer/data/token_file.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/atomic_file.h"

namespace spotps {
namespace {

constexpr absl::string_view kMagic = "SPTOKENS";
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxVocabSize = 1u << 16;  // Tokens are stored as uint16.

void AppendLittleEndian(uint64_t value, int bytes, std::string& out) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((value >> (8 * i)) & 0xff));
}

uint64_t ReadLittleEndian(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{p[i]} << (8 * i);
  return value;
}

std::string EncodeHeader(const TokenFileHeader& header) {
  std::string out(kMagic.data(), kMagic.size());
  AppendLittleEndian(header.version, 4, out);
  AppendLittleEndian(header.vocab_size, 4, out);
  AppendLittleEndian(header.num_train_tokens, 8, out);
  AppendLittleEndian(header.num_val_tokens, 8, out);
  AppendLittleEndian(header.payload_checksum, 8, out);
  return out;
}

TokenFileHeader DecodeHeader(const uint8_t* p) {
  TokenFileHeader header;
  header.version = static_cast<uint32_t>(ReadLittleEndian(p + 8, 4));
  header.vocab_size = static_cast<uint32_t>(ReadLittleEndian(p + 12, 4));
  header.num_train_tokens = ReadLittleEndian(p + 16, 8);
  header.num_val_tokens = ReadLittleEndian(p + 24, 8);
  header.payload_checksum = ReadLittleEndian(p + 32, 8);
  return header;
}

absl::Status ValidateTokens(absl::Span<const uint16_t> tokens, uint32_t vocab_size,
                            double val_fraction) {
  if (vocab_size == 0 || vocab_size > kMaxVocabSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size must be in [1, ", kMaxVocabSize, "], got ", vocab_size));
  }
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

}  // namespace

uint64_t TokenPayloadChecksum(absl::Span<const uint8_t> payload) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint8_t byte : payload) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

absl::StatusOr<TokenFileHeader> WriteTokenFile(const std::string& path,
                                               absl::Span<const uint16_t> tokens,
                                               uint32_t vocab_size, double val_fraction) {
  if (absl::Status status = ValidateTokens(tokens, vocab_size, val_fraction); !status.ok()) {
    return status;
  }
  // The header goes in front of the payload once the payload's checksum is
  // known; reserving its bytes first avoids copying the payload.
  std::string contents(kTokenFileHeaderBytes, '\0');
  contents.reserve(kTokenFileHeaderBytes + tokens.size() * kTokenFileBytesPerToken);
  for (uint16_t token : tokens) AppendLittleEndian(token, 2, contents);

  TokenFileHeader header;
  header.version = kVersion;
  header.vocab_size = vocab_size;
  header.num_val_tokens = static_cast<uint64_t>(std::floor(val_fraction * double(tokens.size())));
  header.num_train_tokens = tokens.size() - header.num_val_tokens;
  header.payload_checksum = TokenPayloadChecksum(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(contents.data()), contents.size())
          .subspan(kTokenFileHeaderBytes));
  contents.replace(0, kTokenFileHeaderBytes, EncodeHeader(header));

  if (absl::Status status = WriteFileAtomically(path, contents); !status.ok()) {
    return status;
  }
  return header;
}

absl::StatusOr<TokenFileHeader> ParseTokenFile(absl::Span<const uint8_t> file) {
  if (file.size() < kTokenFileHeaderBytes) {
    return absl::DataLossError(absl::StrCat("token file truncated: ", file.size(),
                                            " bytes, shorter than its ", kTokenFileHeaderBytes,
                                            "-byte header"));
  }
  if (std::memcmp(file.data(), kMagic.data(), kMagic.size()) != 0) {
    return absl::InvalidArgumentError("not a spotps token file (bad magic; expected \"SPTOKENS\")");
  }
  const TokenFileHeader header = DecodeHeader(file.data());
  if (header.version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported token file version ",
                                                   header.version, " (this build reads version ",
                                                   kVersion, ")"));
  }
  // Bounding the counts keeps the size arithmetic below from overflowing.
  constexpr uint64_t kMaxTokens = uint64_t{1} << 60;
  if (header.num_train_tokens > kMaxTokens || header.num_val_tokens > kMaxTokens) {
    return absl::DataLossError("token file header has absurd token counts");
  }
  const uint64_t payload_bytes =
      (header.num_train_tokens + header.num_val_tokens) * kTokenFileBytesPerToken;
  if (file.size() != kTokenFileHeaderBytes + payload_bytes) {
    return absl::DataLossError(absl::StrCat(
        "token file size mismatch: header promises ", kTokenFileHeaderBytes + payload_bytes,
        " bytes (", header.num_train_tokens, " train + ", header.num_val_tokens,
        " validation tokens), file has ", file.size(),
        file.size() < kTokenFileHeaderBytes + payload_bytes ? " (truncated)" : ""));
  }
  const uint64_t checksum = TokenPayloadChecksum(file.subspan(kTokenFileHeaderBytes));
  if (checksum != header.payload_checksum) {
    return absl::DataLossError(absl::StrCat("token file payload is corrupt: checksum ",
                                            absl::Hex(checksum), " != header's ",
                                            absl::Hex(header.payload_checksum)));
  }
  return header;
}

}  // namespace spotps
