// GPT-2's pre-tokenization: the pieces of text that its regular expression
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches, one after the other, exactly as JavaScript's String.matchAll
// with the `u` flag finds them (the gpt-3-encoder package's encode()).
// BPE then merges bytes within each piece, never across pieces.

#ifndef SPOTPS_TRAINER_DATA_GPT2_PRETOKENIZER_H_
#define SPOTPS_TRAINER_DATA_GPT2_PRETOKENIZER_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "trainer/data/unicode_classes.h"

namespace spotps {

// Yields the pieces of one text front to back; together they are the text.
class Gpt2Pretokenizer {
 public:
  // `text` must be valid UTF-8 (see CheckUtf8) and outlive this object.
  explicit Gpt2Pretokenizer(absl::string_view text) : text_(text) {}

  // Sets *piece to the next piece and returns true, or returns false at
  // the end of the text.
  bool Next(absl::string_view* piece);

 private:
  // The class of the code point at byte `at` (< text size); sets *length.
  CodePointClass ClassAt(size_t at, int* length) const;
  // The end of the run of code points of class `run_class` from `at`.
  size_t RunEnd(size_t at, CodePointClass run_class) const;
  // The length of a contraction ('s 't 're 've 'm 'll 'd) at `at`, or 0.
  size_t ContractionLength(size_t at) const;
  // The end of the whitespace piece that starts at `at`.
  size_t WhitespacePieceEnd(size_t at) const;

  absl::string_view text_;
  size_t position_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_GPT2_PRETOKENIZER_H_
