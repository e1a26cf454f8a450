// Strict UTF-8 (RFC 3629): checking text before anything splits it into
// characters, and decoding text that passed the check.

#ifndef SPOTPS_TRAINER_DATA_UTF8_H_
#define SPOTPS_TRAINER_DATA_UTF8_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace spotps {

// The offset of the first byte of `text` that does not belong to a valid
// UTF-8 sequence (overlong forms, surrogates, values past U+10FFFF and
// truncated sequences are all invalid), or text.size() if it is all valid.
size_t FindInvalidUtf8(absl::string_view text);

// OK for valid UTF-8; otherwise InvalidArgument naming the byte offset,
// the line (1-based) and the offending bytes, prefixed by `what` (a file,
// a row) unless it is empty, e.g. "kjv.txt: invalid UTF-8 at byte 1234
// (line 5): c3 28".
absl::Status CheckUtf8(absl::string_view text, absl::string_view what = "");

// The code point that starts at `p` in text that passed the check above;
// sets *length to its byte count (1 to 4).
inline char32_t DecodeValidUtf8(const char* p, int* length) {
  const auto byte = [p](int i) { return static_cast<uint8_t>(p[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    *length = 1;
    return lead;
  }
  if (lead < 0xe0) {
    *length = 2;
    return (char32_t{lead & 0x1fu} << 6) | (byte(1) & 0x3fu);
  }
  if (lead < 0xf0) {
    *length = 3;
    return (char32_t{lead & 0x0fu} << 12) | (char32_t{byte(1) & 0x3fu} << 6) | (byte(2) & 0x3fu);
  }
  *length = 4;
  return (char32_t{lead & 0x07u} << 18) | (char32_t{byte(1) & 0x3fu} << 12) |
         (char32_t{byte(2) & 0x3fu} << 6) | (byte(3) & 0x3fu);
}

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_UTF8_H_
