// FNV-1a, 64-bit: the checksum of spotps' data files and the identity hash
// of tokenizer vocabularies. Simple and streaming; it catches torn or
// flipped bytes and tells vocabularies apart, but is no defence against
// deliberate tampering.

#ifndef SPOTPS_TRAINER_DATA_FNV1A_H_
#define SPOTPS_TRAINER_DATA_FNV1A_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spotps {

inline constexpr uint64_t kFnv1a64Start = 0xcbf29ce484222325ull;

// The hash of `bytes`, continuing from `hash` (kFnv1a64Start to begin), so
// that Fnv1a64(b, Fnv1a64(a)) is the hash of a followed by b.
inline uint64_t Fnv1a64(absl::Span<const uint8_t> bytes, uint64_t hash = kFnv1a64Start) {
  for (uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

inline uint64_t Fnv1a64(absl::string_view bytes, uint64_t hash = kFnv1a64Start) {
  return Fnv1a64(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      hash);
}

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_FNV1A_H_
