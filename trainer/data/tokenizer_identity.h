// What a data file records about the tokenizer that made its ids, so that
// readers can check the ids fit a model and decode them with the same
// vocabulary.

#ifndef SPOTPS_TRAINER_DATA_TOKENIZER_IDENTITY_H_
#define SPOTPS_TRAINER_DATA_TOKENIZER_IDENTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/little_endian.h"

namespace spotps {

// Stored as a uint32 in file headers: never renumber.
enum class TokenizerKind : uint32_t {
  kUnknown = 0,  // A raw_u16 file: ids with no record of their tokenizer.
  kByte = 1,
  kGpt2 = 2,
  kSentencePiece = 3,
};

// "unknown", "byte", "gpt2", "sentencepiece".
absl::string_view TokenizerKindName(TokenizerKind kind);

struct TokenizerIdentity {
  TokenizerKind kind = TokenizerKind::kByte;
  uint32_t vocab_size = 256;
  // FNV-1a 64 of the vocabulary's files (gpt2: encoder.json then
  // vocab.bpe; sentencepiece: the model file); 0 for byte.
  uint64_t vocabulary_hash = 0;
  // sentencepiece: the model's file name, in the data file's directory.
  std::string model_file;
};

// Appends the identity's header fields: kind, vocab_size (uint32),
// vocabulary_hash (uint64), model_file (uint32 length, then its bytes).
void PutTokenizerIdentity(const TokenizerIdentity& identity, std::string* fields);

// Takes those fields from `cursor`; DataLoss (naming `what`) if they run
// out, name an unknown kind, a zero vocabulary, or a model file that is
// not a plain file name (so a file cannot point readers elsewhere).
absl::Status TakeTokenizerIdentity(FieldCursor& cursor, absl::string_view what,
                                   TokenizerIdentity* identity);

// InvalidArgument unless `name` is a plain file name: 1 to 255 bytes,
// no '/', no NUL, not "." or "..".
absl::Status CheckModelFileName(absl::string_view name);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TOKENIZER_IDENTITY_H_
