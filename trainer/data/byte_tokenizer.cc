#include "trainer/data/byte_tokenizer.h"

namespace spotps {

std::string BytesFromTokens(absl::Span<const int64_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (int64_t token : tokens) {
    text.push_back(token >= 0 && token < kByteVocabSize ? static_cast<char>(token) : '?');
  }
  return text;
}

absl::Status ByteTokenizer::Encode(absl::string_view text, std::vector<uint32_t>& ids) {
  AppendByteTokens(text, ids);
  return absl::OkStatus();
}

std::string ByteTokenizer::Decode(absl::Span<const int64_t> ids) const {
  return BytesFromTokens(ids);
}

}  // namespace spotps
