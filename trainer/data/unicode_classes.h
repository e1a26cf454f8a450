// The Unicode character classes GPT-2's pre-tokenizer splits text by:
// letters (\p{L}), numbers (\p{N}) and whitespace (\s) as JavaScript's
// regular expressions with the `u` flag define them, and everything else.

#ifndef SPOTPS_TRAINER_DATA_UNICODE_CLASSES_H_
#define SPOTPS_TRAINER_DATA_UNICODE_CLASSES_H_

#include <cstdint>

namespace spotps {

enum class CodePointClass : uint8_t { kOther, kLetter, kNumber, kWhitespace };

// The class of one Unicode scalar value; kOther for unassigned code points,
// surrogates and values past U+10FFFF.
CodePointClass ClassOfCodePoint(char32_t code_point);

// The Unicode version the tables were generated for (node's, see
// generate_unicode_classes.js), e.g. "17.0".
const char* CodePointClassesUnicodeVersion();

namespace unicode_internal {

// Sorted, disjoint ranges of code points outside kOther
// (unicode_classes_table.cc, generated).
struct CodePointRange {
  char32_t first;
  char32_t last;
  CodePointClass code_point_class;
};
extern const CodePointRange kCodePointRanges[];
extern const int kNumCodePointRanges;
extern const char kCodePointRangesUnicodeVersion[];

}  // namespace unicode_internal
}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_UNICODE_CLASSES_H_
