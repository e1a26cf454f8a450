// Byte-level tokenization: every byte of the text is one token, so the
// vocabulary is exactly 256 ids and any file (UTF-8 or not) round-trips.

#ifndef SPOTPS_TRAINER_DATA_BYTE_TOKENIZER_H_
#define SPOTPS_TRAINER_DATA_BYTE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spotps {

inline constexpr int kByteVocabSize = 256;

// Appends one token per byte of `text` to `tokens`.
void AppendByteTokens(absl::string_view text, std::vector<uint16_t>& tokens);

// The bytes `tokens` stand for; ids outside 0..255 (which a model with a
// larger vocabulary may sample) become '?'.
std::string BytesFromTokens(absl::Span<const int64_t> tokens);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_BYTE_TOKENIZER_H_
