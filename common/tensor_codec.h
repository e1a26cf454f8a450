// Tensor payload encoding: FP32 values <-> raw little-endian bytes of a wire
// dtype (FP32 or BF16), plus the finiteness check every incoming payload gets.
#ifndef SPOTPS_COMMON_TENSOR_CODEC_H_
#define SPOTPS_COMMON_TENSOR_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spotps/v1/parameter_server.pb.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian and spotps copies it as is");

namespace spotps {

// Bytes per element of a wire dtype; 0 for DTYPE_UNSPECIFIED, unknown values
// and DTYPE_INT8, whose size depends on where its elements lie.
size_t WireBytesPerElement(v1::DType dtype);
// FP32 or BF16: what pulls, pushes and inits may carry.
bool IsValidWireDType(int dtype);
// The wire dtypes plus DTYPE_INT8: what pushes may carry.
bool IsValidPushDType(int dtype);

// Bytes of the payload of n elements starting `offset` elements into their
// partition, in a push dtype.
size_t PayloadBytes(v1::DType dtype, uint64_t offset, int64_t n);
// Writes that payload of src[0, n) to dst (PayloadBytes long).
void EncodePayload(const float* src, uint64_t offset, int64_t n, v1::DType dtype, char* dst);

// BF16 is the top half of an FP32; conversion rounds to nearest even.
inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
uint16_t FloatToBf16(float f);

// Writes n values as `dtype` into dst, which holds n * WireBytesPerElement.
// BF16 goes through oneDNN's reorder (vcvtneps2bf16 where the CPU has it).
void EncodeFp32(const float* src, int64_t n, v1::DType dtype, char* dst);
// Makes BF16 encoding on the calling thread run on that thread alone. oneDNN
// otherwise fans out to OpenMP workers, which on a small machine only spin
// against the other RPCs converting at the same time (shard handlers).
void UseSingleThreadedConversion();
// The same for the scope's lifetime: the thread's OpenMP setting comes back
// at its end (for a thread that also computes, such as a trainer's).
class SingleThreadedConversionScope {
 public:
  SingleThreadedConversionScope();
  ~SingleThreadedConversionScope();
  SingleThreadedConversionScope(const SingleThreadedConversionScope&) = delete;
  SingleThreadedConversionScope& operator=(const SingleThreadedConversionScope&) = delete;

 private:
  const int previous_;
};
// Appends the encoding of n values to *out.
void AppendEncoded(const float* src, int64_t n, v1::DType dtype, std::string* out);

// Decodes `bytes` (exactly n elements of `dtype`) into dst.
absl::Status DecodeToFp32(v1::DType dtype, absl::string_view bytes, int64_t n, float* dst);

// True when every element of the payload is a finite number.
bool AllFinite(v1::DType dtype, absl::string_view bytes);
// True when every element is finite and at most `max_abs` in magnitude.
bool AllWithin(v1::DType dtype, absl::string_view bytes, float max_abs);

}  // namespace spotps

#endif  // SPOTPS_COMMON_TENSOR_CODEC_H_
