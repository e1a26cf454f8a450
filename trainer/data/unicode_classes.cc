#include "trainer/data/unicode_classes.h"

#include <algorithm>
#include <array>

namespace spotps {
namespace {

using unicode_internal::CodePointRange;
using unicode_internal::kCodePointRanges;
using unicode_internal::kNumCodePointRanges;

// ASCII is most of most text: one table lookup instead of a search.
std::array<CodePointClass, 128> AsciiClasses() {
  std::array<CodePointClass, 128> classes;
  classes.fill(CodePointClass::kOther);
  for (int i = 0; i < kNumCodePointRanges && kCodePointRanges[i].first < 128; ++i) {
    const CodePointRange& range = kCodePointRanges[i];
    for (char32_t c = range.first; c <= range.last && c < 128; ++c) {
      classes[c] = range.code_point_class;
    }
  }
  return classes;
}

}  // namespace

CodePointClass ClassOfCodePoint(char32_t code_point) {
  static const std::array<CodePointClass, 128> kAscii = AsciiClasses();
  if (code_point < 128) return kAscii[code_point];
  const CodePointRange* end = kCodePointRanges + kNumCodePointRanges;
  // The first range whose last code point is not below code_point.
  const CodePointRange* range = std::lower_bound(
      kCodePointRanges, end, code_point,
      [](const CodePointRange& r, char32_t c) { return r.last < c; });
  if (range == end || range->first > code_point) return CodePointClass::kOther;
  return range->code_point_class;
}

const char* CodePointClassesUnicodeVersion() {
  return unicode_internal::kCodePointRangesUnicodeVersion;
}

}  // namespace spotps
