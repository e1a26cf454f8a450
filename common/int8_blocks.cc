#include "common/int8_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"

namespace spotps {
namespace {

// The length of the piece of a block that starts at partition element `at`
// and may run for `left` elements.
int64_t PieceAt(uint64_t at, int64_t left) {
  return std::min<int64_t>(left,
                           kInt8BlockElements - static_cast<int64_t>(at % kInt8BlockElements));
}

// Encodes one piece (at most a block): scale, then codes.
void EncodePiece(const float* src, int64_t n, char* dst) {
  float largest = 0, poison = 0;  // poison: NaN once any input is Inf or NaN.
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::fabs(src[i]));
    poison += src[i] - src[i];
  }
  const float scale = poison == 0 ? largest / 127.0f : std::nanf("");
  std::memcpy(dst, &scale, sizeof(scale));
  auto* codes = reinterpret_cast<int8_t*>(dst + sizeof(scale));
  // A scale of 0 (all zeros, or magnitudes so small that it underflows) or
  // NaN carries no codes. Dividing, not multiplying by 127 / largest, which
  // overflows for the smallest magnitudes.
  const bool coded = scale > 0;
  for (int64_t i = 0; i < n; ++i) {
    const float q = coded ? std::nearbyint(src[i] / scale) : 0.0f;
    codes[i] = static_cast<int8_t>(q >= 127.0f ? 127 : q <= -127.0f ? -127 : q);
  }
}

float ScaleOf(const char* piece) {
  float scale;
  std::memcpy(&scale, piece, sizeof(scale));
  return scale;
}

// Decodes a piece's n codes, which follow its scale; returns the first
// code of -128 (which no encoder writes, and which would take an element
// past 127 * scale), or n.
int64_t DecodePiece(const char* piece, int64_t n, float scale, float* dst) {
  const auto* codes = reinterpret_cast<const int8_t*>(piece + sizeof(scale));
  bool below = false;
  for (int64_t i = 0; i < n; ++i) {
    below = below || codes[i] == -128;
    dst[i] = static_cast<float>(codes[i]) * scale;
  }
  if (!below) return n;
  return std::find(codes, codes + n, int8_t{-128}) - codes;
}

}  // namespace

size_t Int8PayloadBytes(uint64_t offset, int64_t n) {
  size_t bytes = 0;
  for (int64_t done = 0; done < n;) {
    const int64_t piece = PieceAt(offset + done, n - done);
    bytes += sizeof(float) + static_cast<size_t>(piece);
    done += piece;
  }
  return bytes;
}

void EncodeInt8Blocks(const float* src, uint64_t offset, int64_t n, char* dst) {
  for (int64_t done = 0; done < n;) {
    const int64_t piece = PieceAt(offset + done, n - done);
    EncodePiece(src + done, piece, dst);
    dst += sizeof(float) + piece;
    done += piece;
  }
}

absl::StatusOr<int64_t> Int8PayloadElements(uint64_t offset, size_t bytes) {
  int64_t n = 0;
  for (size_t at = 0; at < bytes;) {
    const size_t left = bytes - at;
    if (left <= sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "int8 payload ends %d bytes into a block (at element %d), before any of its codes", left,
          offset + n));
    }
    const int64_t piece = PieceAt(offset + n, static_cast<int64_t>(left - sizeof(float)));
    at += sizeof(float) + static_cast<size_t>(piece);
    n += piece;
  }
  if (n == 0) return absl::InvalidArgumentError("int8 payload carries no element");
  return n;
}

absl::Status DecodeInt8Blocks(absl::string_view bytes, uint64_t offset, int64_t n, float max_abs,
                              float* dst) {
  if (n < 0 || bytes.size() != Int8PayloadBytes(offset, n)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("int8 payload has %d bytes, expected %d (%d elements at element %d)",
                        bytes.size(), n < 0 ? 0 : Int8PayloadBytes(offset, n), n, offset));
  }
  const char* p = bytes.data();
  for (int64_t done = 0; done < n;) {
    const int64_t piece = PieceAt(offset + done, n - done);
    const float scale = ScaleOf(p);
    if (!std::isfinite(scale) || scale < 0 || scale * 127.0f > max_abs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "int8 block at element %d has scale %g (must be finite, >= 0 and at most %g)",
          offset + done, scale, max_abs / 127.0f));
    }
    if (const int64_t bad = DecodePiece(p, piece, scale, dst + done); bad < piece) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "int8 element %d has code -128 (codes run from -127 to 127)", offset + done + bad));
    }
    p += sizeof(scale) + piece;
    done += piece;
  }
  return absl::OkStatus();
}

void RoundTripInt8Blocks(const float* src, uint64_t offset, int64_t n, float* dst) {
  char block[sizeof(float) + kInt8BlockElements];
  for (int64_t done = 0; done < n;) {
    const int64_t piece = PieceAt(offset + done, n - done);
    EncodePiece(src + done, piece, block);
    DecodePiece(block, piece, ScaleOf(block), dst + done);
    done += piece;
  }
}

}  // namespace spotps
