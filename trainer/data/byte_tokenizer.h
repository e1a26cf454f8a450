// Byte-level tokenization: every byte of the text is one token, so the
// vocabulary is exactly 256 ids and any file (UTF-8 or not) round-trips.

#ifndef SPOTPS_TRAINER_DATA_BYTE_TOKENIZER_H_
#define SPOTPS_TRAINER_DATA_BYTE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/tokenizer.h"

namespace spotps {

inline constexpr int kByteVocabSize = 256;

// Appends one token per byte of `text` to `tokens`.
template <typename Id>
void AppendByteTokens(absl::string_view text, std::vector<Id>& tokens) {
  tokens.reserve(tokens.size() + text.size());
  for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
}

// The bytes `tokens` stand for; ids outside 0..255 (which a model with a
// larger vocabulary may sample) become '?'.
std::string BytesFromTokens(absl::Span<const int64_t> tokens);

// The Tokenizer face of the functions above.
class ByteTokenizer final : public Tokenizer {
 public:
  TokenizerKind kind() const override { return TokenizerKind::kByte; }
  int64_t vocab_size() const override { return kByteVocabSize; }
  uint64_t vocabulary_hash() const override { return 0; }
  int64_t padding_id() const override { return 0; }
  absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) override;
  std::string Decode(absl::Span<const int64_t> ids) const override;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_BYTE_TOKENIZER_H_
