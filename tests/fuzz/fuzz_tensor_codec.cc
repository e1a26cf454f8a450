// libFuzzer target: the tensor codec decodes every payload a shard or a
// client receives, and the int8 block decoder every int8 push. Any bytes
// must decode without crashing, and what decodes must survive a round trip
// through its own encoding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/int8_blocks.h"
#include "common/tensor_codec.h"

namespace {

// Blockwise int8 (pushes): the size alone says how many elements a payload
// holds, or that it ends inside a scale; what decodes is finite and within
// the bound its scales were checked against.
void FuzzInt8(uint64_t offset, absl::string_view bytes) {
  constexpr float kBound = 1e18f;
  absl::StatusOr<int64_t> n = spotps::Int8PayloadElements(offset, bytes.size());
  if (!n.ok()) return;
  if (spotps::Int8PayloadBytes(offset, *n) != bytes.size()) std::abort();
  std::vector<float> values(static_cast<size_t>(*n) + 1);
  if (spotps::DecodeInt8Blocks(bytes, offset, *n + 1, kBound, values.data()).ok()) std::abort();
  if (!spotps::DecodeInt8Blocks(bytes, offset, *n, kBound, values.data()).ok()) return;
  for (int64_t i = 0; i < *n; ++i) {
    if (!(std::fabs(values[i]) <= kBound)) std::abort();
  }
  // Its own encoding decodes, to within half a step of each block.
  std::string encoded(spotps::Int8PayloadBytes(offset, *n), '\0');
  spotps::EncodeInt8Blocks(values.data(), offset, *n, encoded.data());
  std::vector<float> again(static_cast<size_t>(*n));
  if (!spotps::DecodeInt8Blocks(encoded, offset, *n, kBound, again.data()).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if ((data[0] & 2) != 0) {
    FuzzInt8(data[0] >> 2, absl::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    return 0;
  }
  const spotps::v1::DType dtype =
      (data[0] & 1) != 0 ? spotps::v1::DTYPE_BF16 : spotps::v1::DTYPE_FP32;
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t width = spotps::WireBytesPerElement(dtype);
  const int64_t n = static_cast<int64_t>(bytes.size() / width);
  std::vector<float> values(static_cast<size_t>(n));
  // A count that does not match the bytes must be refused, not trusted.
  if (spotps::DecodeToFp32(dtype, bytes, n + 1, values.data()).ok()) std::abort();
  if (!spotps::DecodeToFp32(dtype, bytes.substr(0, n * width), n, values.data()).ok()) {
    std::abort();
  }
  const bool finite = spotps::AllFinite(dtype, bytes.substr(0, n * width));
  if (spotps::AllWithin(dtype, bytes.substr(0, n * width), 1e18f) && !finite) std::abort();
  if (!finite || n == 0) return 0;
  // Finite values re-encode to the same bytes (BF16 and FP32 alike).
  std::string encoded;
  spotps::AppendEncoded(values.data(), n, dtype, &encoded);
  if (encoded.size() != static_cast<size_t>(n * width)) std::abort();
  std::vector<float> again(static_cast<size_t>(n));
  if (!spotps::DecodeToFp32(dtype, encoded, n, again.data()).ok()) std::abort();
  if (std::memcmp(values.data(), again.data(), values.size() * sizeof(float)) != 0) std::abort();
  return 0;
}
