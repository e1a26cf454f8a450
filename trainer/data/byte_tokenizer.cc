#include "trainer/data/byte_tokenizer.h"

namespace spotps {

void AppendByteTokens(absl::string_view text, std::vector<uint16_t>& tokens) {
  tokens.reserve(tokens.size() + text.size());
  for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
}

std::string BytesFromTokens(absl::Span<const int64_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (int64_t token : tokens) {
    text.push_back(token >= 0 && token < kByteVocabSize ? static_cast<char>(token) : '?');
  }
  return text;
}

}  // namespace spotps
