#include "common/tensor_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace spotps {
namespace {

std::vector<float> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(TensorCodecTest, Fp32RoundTripIsExact) {
  const std::vector<float> v = RandomValues(10'000, 1);
  std::string bytes;
  AppendEncoded(v.data(), v.size(), v1::DTYPE_FP32, &bytes);
  ASSERT_EQ(bytes.size(), v.size() * 4);
  std::vector<float> back(v.size());
  ASSERT_TRUE(DecodeToFp32(v1::DTYPE_FP32, bytes, v.size(), back.data()).ok());
  EXPECT_EQ(back, v);
}

TEST(TensorCodecTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to even.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -16)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
}

// The bulk path (oneDNN reorder) must agree bit for bit with the scalar rule.
TEST(TensorCodecTest, BulkBf16MatchesScalarRule) {
  std::vector<float> v = RandomValues(100'003, 2);
  v[17] = 1.0f + std::ldexp(1.0f, -8);  // A tie.
  v[18] = std::numeric_limits<float>::max();
  v[19] = -0.0f;
  std::string bytes;
  AppendEncoded(v.data(), v.size(), v1::DTYPE_BF16, &bytes);
  ASSERT_EQ(bytes.size(), v.size() * 2);
  const auto* h = reinterpret_cast<const uint16_t*>(bytes.data());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(h[i], FloatToBf16(v[i])) << "element " << i << " value " << v[i];
  }
  std::vector<float> back(v.size());
  ASSERT_TRUE(DecodeToFp32(v1::DTYPE_BF16, bytes, v.size(), back.data()).ok());
  for (size_t i = 0; i < v.size(); i += 97) {
    if (std::isfinite(back[i])) {
      EXPECT_NEAR(back[i], v[i], std::abs(v[i]) / 128 + 1e-30);
    }
  }
}

TEST(TensorCodecTest, DecodeRejectsWrongByteCounts) {
  std::string bytes(10, '\0');
  std::vector<float> out(3);
  EXPECT_EQ(DecodeToFp32(v1::DTYPE_FP32, bytes, 3, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeToFp32(v1::DTYPE_UNSPECIFIED, bytes, 3, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorCodecTest, FiniteCheckFindsNanAndInf) {
  std::vector<float> v = RandomValues(4096, 3);
  for (v1::DType dtype : {v1::DTYPE_FP32, v1::DTYPE_BF16}) {
    std::string ok;
    AppendEncoded(v.data(), v.size(), dtype, &ok);
    EXPECT_TRUE(AllFinite(dtype, ok));
    for (float bad : {std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), std::nanf("")}) {
      std::vector<float> w = v;
      w[4000] = bad;
      std::string bytes;
      AppendEncoded(w.data(), w.size(), dtype, &bytes);
      EXPECT_FALSE(AllFinite(dtype, bytes)) << v1::DType_Name(dtype) << " " << bad;
    }
  }
}

}  // namespace
}  // namespace spotps
