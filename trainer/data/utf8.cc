#include "trainer/data/utf8.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spotps {
namespace {

// The length of the valid sequence at text[i], or 0 if none starts there.
// The ranges of the second byte are RFC 3629's table, which rules out
// overlong forms, surrogates and values past U+10FFFF.
int ValidSequenceLength(const uint8_t* p, size_t available) {
  const uint8_t lead = p[0];
  if (lead < 0x80) return 1;
  int length;
  uint8_t second_low = 0x80, second_high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) second_low = 0xa0;
    if (lead == 0xed) second_high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) second_low = 0x90;
    if (lead == 0xf4) second_high = 0x8f;
  } else {
    return 0;
  }
  if (available < static_cast<size_t>(length)) return 0;
  if (p[1] < second_low || p[1] > second_high) return 0;
  for (int i = 2; i < length; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
  }
  return length;
}

bool AllAscii(const uint8_t* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return (word & 0x8080808080808080ull) == 0;
}

}  // namespace

size_t FindInvalidUtf8(absl::string_view text) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    if (i + 8 <= size && AllAscii(p + i)) {
      i += 8;
      continue;
    }
    const int length = ValidSequenceLength(p + i, size - i);
    if (length == 0) return i;
    i += length;
  }
  return size;
}

absl::Status CheckUtf8(absl::string_view text, absl::string_view what) {
  const size_t offset = FindInvalidUtf8(text);
  if (offset == text.size()) return absl::OkStatus();
  const size_t line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
  std::string bytes;
  for (size_t i = offset; i < std::min(text.size(), offset + 4); ++i) {
    absl::StrAppendFormat(&bytes, " %02x", static_cast<uint8_t>(text[i]));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, what.empty() ? "" : ": ",
                                                 "invalid UTF-8 at byte ", offset, " (line ",
                                                 line, "):", bytes));
}

}  // namespace spotps
