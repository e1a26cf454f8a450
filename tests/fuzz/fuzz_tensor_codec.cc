// libFuzzer target: the tensor codec decodes every payload a shard or a
// client receives. Any bytes must decode without crashing, and what decodes
// must survive a round trip through its own encoding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/tensor_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
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
