// The interface every tokenizer implements (byte_tokenizer.h,
// gpt2_bpe.h, sentencepiece_tokenizer.h); tokenizer_factory.h makes them.

#ifndef SPOTPS_TRAINER_DATA_TOKENIZER_H_
#define SPOTPS_TRAINER_DATA_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/tokenizer_identity.h"

namespace spotps {

// Turns text into ids in [0, vocab_size()) and back. Encode() may keep
// caches, so one instance serves one thread at a time.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual TokenizerKind kind() const = 0;
  virtual int64_t vocab_size() const = 0;
  // See TokenizerIdentity::vocabulary_hash.
  virtual uint64_t vocabulary_hash() const = 0;
  // The id labeled examples are padded with (their attention mask hides it):
  // byte 0, gpt2 <|endoftext|>, sentencepiece its pad, else eos, else unk id.
  virtual int64_t padding_id() const = 0;

  // Appends the ids of `text` to `ids`. InvalidArgument, with the byte
  // offset, for text the tokenizer cannot take (gpt2 and sentencepiece
  // need valid UTF-8; byte takes anything).
  virtual absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) = 0;

  // The bytes `ids` stand for: decoding what Encode() made gives the text
  // back exactly. Ids outside [0, vocab_size()), which a model with a larger
  // vocabulary may sample, become '?'; ids that split a character give
  // bytes that are not valid UTF-8.
  virtual std::string Decode(absl::Span<const int64_t> ids) const = 0;
};

// The identity a data file records for ids made by `tokenizer`; model_file
// is the name the caller saved the model under (sentencepiece only).
TokenizerIdentity IdentityOf(const Tokenizer& tokenizer, std::string model_file = "");

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TOKENIZER_H_
