// Blockwise int8: the compressed wire form of pushed gradients (DTYPE_INT8).
//
// A partition's elements fall into blocks of kInt8BlockElements, counted
// from the partition's first element. A chunk of n elements at `offset`
// carries, for each block it touches and in order, that block's FP32 scale
// (little-endian) followed by the block's elements it covers as int8 codes:
// element = code * scale. A block's scale is its largest magnitude / 127,
// so each element is off by at most scale / 2. Since the blocks are fixed
// by the partition, not by the chunk, a sender that splits chunks only at
// block borders sends exactly what RoundTripInt8Blocks predicts, which is
// what a trainer's error feedback relies on.
#ifndef SPOTPS_COMMON_INT8_BLOCKS_H_
#define SPOTPS_COMMON_INT8_BLOCKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

inline constexpr int64_t kInt8BlockElements = 256;

// Bytes of the encoding of n elements starting `offset` elements into
// their partition: n codes plus 4 bytes per block touched.
size_t Int8PayloadBytes(uint64_t offset, int64_t n);

// Writes the encoding of src[0, n) (elements offset .. offset + n of their
// partition) to dst, which holds Int8PayloadBytes(offset, n). Non-finite
// inputs are the caller's to refuse: they give a non-finite scale.
void EncodeInt8Blocks(const float* src, uint64_t offset, int64_t n, char* dst);

// How many elements a payload at `offset` carries, from its size alone;
// INVALID_ARGUMENT for a payload that ends inside a block's scale (a short
// block) or carries nothing.
absl::StatusOr<int64_t> Int8PayloadElements(uint64_t offset, size_t bytes);

// Decodes a payload of exactly n elements at `offset` into dst.
// INVALID_ARGUMENT, naming the element, when the size does not match n, a
// scale is not finite, is negative, or lets an element exceed `max_abs`
// (127 * scale > max_abs), or a code is -128 (encoders write -127 to 127,
// so every element is within 127 * scale). dst is undefined after an error.
absl::Status DecodeInt8Blocks(absl::string_view bytes, uint64_t offset, int64_t n, float max_abs,
                              float* dst);

// dst[i] = what src[i] decodes to after EncodeInt8Blocks at `offset`
// (src and dst may be the same).
void RoundTripInt8Blocks(const float* src, uint64_t offset, int64_t n, float* dst);

}  // namespace spotps

#endif  // SPOTPS_COMMON_INT8_BLOCKS_H_
