#include "common/tensor_codec.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/int8_blocks.h"
#include "common/onednn_engine.h"

namespace spotps {
namespace {

// Below this size the scalar loop beats setting up a oneDNN primitive.
constexpr int64_t kMinElementsForReorder = 4096;

// Widening is a shift; one clone per ISA lets it run at memory speed. Wire
// bytes carry no alignment promise, so elements are loaded with memcpy
// (which compiles to the same unaligned vector loads).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void Bf16ToFp32(
    const char* __restrict src, int64_t n, float* __restrict dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof(h));
    dst[i] = Bf16ToFloat(h);
  }
}

void Fp32ToBf16Scalar(const float* src, int64_t n, uint16_t* dst) {
  // dst points into wire bytes, which carry no alignment promise.
  char* out = reinterpret_cast<char*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToBf16(src[i]);
    std::memcpy(out + 2 * i, &h, sizeof(h));
  }
}

void Fp32ToBf16(const float* src, int64_t n, uint16_t* dst) {
  if (n < kMinElementsForReorder) return Fp32ToBf16Scalar(src, n, dst);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc src_md({n}, dt::f32, tag::a);
  const dnnl::memory::desc dst_md({n}, dt::bf16, tag::a);
  dnnl::memory src_mem(src_md, OneDnnCpuEngine(), const_cast<float*>(src));
  dnnl::memory dst_mem(dst_md, OneDnnCpuEngine(), dst);
  dnnl::stream stream(OneDnnCpuEngine());
  // oneDNN's primitive cache makes re-creating the reorder for a seen size cheap.
  dnnl::reorder(src_mem, dst_mem).execute(stream, src_mem, dst_mem);
  stream.wait();
}

}  // namespace

void UseSingleThreadedConversion() {
  thread_local bool pinned = false;
  if (!pinned) {
    omp_set_num_threads(1);
    pinned = true;
  }
}

SingleThreadedConversionScope::SingleThreadedConversionScope() : previous_(omp_get_max_threads()) {
  omp_set_num_threads(1);
}

SingleThreadedConversionScope::~SingleThreadedConversionScope() { omp_set_num_threads(previous_); }

size_t WireBytesPerElement(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FP32:
      return 4;
    case v1::DTYPE_BF16:
      return 2;
    default:
      return 0;
  }
}

bool IsValidWireDType(int dtype) { return dtype == v1::DTYPE_FP32 || dtype == v1::DTYPE_BF16; }

bool IsValidPushDType(int dtype) { return IsValidWireDType(dtype) || dtype == v1::DTYPE_INT8; }

size_t PayloadBytes(v1::DType dtype, uint64_t offset, int64_t n) {
  if (dtype == v1::DTYPE_INT8) return Int8PayloadBytes(offset, n);
  return static_cast<size_t>(n) * WireBytesPerElement(dtype);
}

void EncodePayload(const float* src, uint64_t offset, int64_t n, v1::DType dtype, char* dst) {
  if (dtype == v1::DTYPE_INT8) {
    EncodeInt8Blocks(src, offset, n, dst);
  } else {
    EncodeFp32(src, n, dtype, dst);
  }
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

void EncodeFp32(const float* src, int64_t n, v1::DType dtype, char* dst) {
  if (n == 0) return;  // src and dst may be null then.
  if (dtype == v1::DTYPE_FP32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    Fp32ToBf16(src, n, reinterpret_cast<uint16_t*>(dst));
  }
}

void AppendEncoded(const float* src, int64_t n, v1::DType dtype, std::string* out) {
  const size_t old = out->size();
  out->resize(old + n * WireBytesPerElement(dtype));
  EncodeFp32(src, n, dtype, out->data() + old);
}

absl::Status DecodeToFp32(v1::DType dtype, absl::string_view bytes, int64_t n, float* dst) {
  const size_t width = WireBytesPerElement(dtype);
  if (width == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("unsupported wire dtype %d", dtype));
  }
  if (bytes.size() != n * width) {
    return absl::InvalidArgumentError(
        absl::StrFormat("payload has %d bytes, expected %d (%d elements of %s)", bytes.size(),
                        n * width, n, v1::DType_Name(dtype)));
  }
  if (n == 0) return absl::OkStatus();  // dst may be null then.
  if (dtype == v1::DTYPE_FP32) {
    std::memcpy(dst, bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  Bf16ToFp32(bytes.data(), n, dst);
  return absl::OkStatus();
}

bool AllFinite(v1::DType dtype, absl::string_view bytes) {
  return AllWithin(dtype, bytes, std::numeric_limits<float>::max());
}

bool AllWithin(v1::DType dtype, absl::string_view bytes, float max_abs) {
  // For IEEE-754 numbers of one sign, the order of the magnitudes is the
  // order of the bit patterns, and Inf and NaN lie above every finite one:
  // one integer compare per element tests both. OR-reducing keeps the loop
  // branch-free so it vectorizes.
  uint32_t limit;
  std::memcpy(&limit, &max_abs, sizeof(limit));
  limit &= 0x7fffffffu;
  if (dtype == v1::DTYPE_BF16) {
    const uint32_t bf16_limit = limit >> 16;  // Truncation rounds the limit down.
    const size_t n = bytes.size() / 2;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, sizeof(h));
      bad |= (static_cast<uint32_t>(h & 0x7fffu) > bf16_limit);
    }
    return bad == 0;
  }
  const size_t n = bytes.size() / 4;
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes.data() + 4 * i, sizeof(bits));
    bad |= ((bits & 0x7fffffffu) > limit);
  }
  return bad == 0;
}

}  // namespace spotps
