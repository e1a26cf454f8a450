#include "common/int8_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/tensor_codec.h"

namespace spotps {
namespace {

constexpr float kBound = 1e18f;

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng) * std::exp(normal(rng));  // Mixed magnitudes.
  return v;
}

std::string Encode(const std::vector<float>& v, uint64_t offset) {
  std::string bytes(Int8PayloadBytes(offset, static_cast<int64_t>(v.size())), '\0');
  EncodeInt8Blocks(v.data(), offset, static_cast<int64_t>(v.size()), bytes.data());
  return bytes;
}

TEST(Int8BlocksTest, SizesCountOneScalePerBlockTouched) {
  EXPECT_EQ(Int8PayloadBytes(0, 256), 260u);
  EXPECT_EQ(Int8PayloadBytes(0, 257), 265u);
  EXPECT_EQ(Int8PayloadBytes(255, 2), 10u);  // Two blocks, one element each.
  EXPECT_EQ(Int8PayloadBytes(100, 156), 160u);
  EXPECT_EQ(Int8PayloadBytes(0, 0), 0u);
  for (uint64_t offset : {0u, 1u, 200u, 256u, 1000u}) {
    for (int64_t n : {1, 55, 156, 256, 257, 1000, 4096}) {
      absl::StatusOr<int64_t> back = Int8PayloadElements(offset, Int8PayloadBytes(offset, n));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, n) << "offset " << offset;
    }
  }
}

TEST(Int8BlocksTest, EachElementIsWithinHalfItsBlocksStep) {
  for (uint64_t offset : {0u, 37u, 256u}) {
    const std::vector<float> v = RandomValues(3000, 7 + offset);
    const std::string bytes = Encode(v, offset);
    std::vector<float> back(v.size());
    ASSERT_TRUE(DecodeInt8Blocks(bytes, offset, 3000, kBound, back.data()).ok());
    for (size_t i = 0; i < v.size();) {
      // The block's piece this element lies in, and its largest magnitude.
      const size_t end = std::min(v.size(), i + 256 - (offset + i) % 256);
      float largest = 0;
      for (size_t j = i; j < end; ++j) largest = std::max(largest, std::fabs(v[j]));
      for (size_t j = i; j < end; ++j) {
        EXPECT_LE(std::fabs(back[j] - v[j]), largest / 127.0f * 0.5001f) << "element " << j;
      }
      i = end;
    }
    std::vector<float> predicted(v.size());
    RoundTripInt8Blocks(v.data(), offset, 3000, predicted.data());
    EXPECT_EQ(std::memcmp(predicted.data(), back.data(), back.size() * sizeof(float)), 0);
  }
}

TEST(Int8BlocksTest, ZerosAndSingleValuesSurvive) {
  std::vector<float> v(300, 0.0f);
  v[5] = -3.5f;  // The largest of its block is exact.
  const std::string bytes = Encode(v, 0);
  std::vector<float> back(v.size(), 1.0f);
  ASSERT_TRUE(DecodeInt8Blocks(bytes, 0, 300, kBound, back.data()).ok());
  EXPECT_FLOAT_EQ(back[5], -3.5f);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != 5) {
      EXPECT_EQ(back[i], 0.0f);
    }
  }
}

// Magnitudes so small that 127 / largest overflows, or largest / 127
// underflows to 0: the codes stay defined and the error within a step.
TEST(Int8BlocksTest, SubnormalBlocksEncode) {
  for (float tiny : {1e-40f, 1e-44f, std::numeric_limits<float>::denorm_min()}) {
    std::vector<float> v(10, 0.0f);
    v[2] = tiny;
    v[7] = -tiny / 2;
    std::vector<float> back(v.size());
    ASSERT_TRUE(DecodeInt8Blocks(Encode(v, 0), 0, 10, kBound, back.data()).ok()) << tiny;
    for (size_t i = 0; i < v.size(); ++i) EXPECT_LE(std::fabs(back[i] - v[i]), tiny) << tiny;
  }
}

TEST(Int8BlocksTest, RefusesBadScalesAndShortBlocks) {
  const std::vector<float> v = RandomValues(600, 3);
  const std::string good = Encode(v, 0);
  std::vector<float> out(600);
  // The second block's scale sits after the first block's 4 + 256 bytes.
  for (float scale : {std::nanf(""), std::numeric_limits<float>::infinity(), -1.0f, 1e17f}) {
    std::string bad = good;
    std::memcpy(bad.data() + 260, &scale, sizeof(scale));
    absl::Status s = DecodeInt8Blocks(bad, 0, 600, kBound, out.data());
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << scale;
    EXPECT_NE(s.message().find("element 256"), std::string::npos) << s.message();
  }
  // A code of -128, which would reach past 127 * scale.
  std::string low = good;
  low[4 + 10] = static_cast<char>(-128);
  absl::Status s = DecodeInt8Blocks(low, 0, 600, kBound, out.data());
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("int8 element 10 has code -128"), std::string::npos) << s.message();
  // Ending inside a scale, or carrying nothing.
  for (size_t cut : {1u, 3u, 4u}) {
    EXPECT_TRUE(absl::IsInvalidArgument(Int8PayloadElements(0, 260 + cut).status())) << cut;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(Int8PayloadElements(0, 0).status()));
  // A count that does not match the bytes.
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeInt8Blocks(good, 0, 599, kBound, out.data())));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeInt8Blocks(good, 1, 600, kBound, out.data())));
}

TEST(Int8BlocksTest, NonFiniteInputGivesARefusedScale) {
  std::vector<float> v(10, 1.0f);
  v[3] = std::numeric_limits<float>::infinity();
  std::vector<float> out(10);
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeInt8Blocks(Encode(v, 0), 0, 10, kBound, out.data())));
  v[3] = std::nanf("");
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeInt8Blocks(Encode(v, 0), 0, 10, kBound, out.data())));
}

TEST(Int8BlocksTest, PayloadHelpersDispatchOnDType) {
  EXPECT_TRUE(IsValidPushDType(v1::DTYPE_INT8));
  EXPECT_FALSE(IsValidWireDType(v1::DTYPE_INT8));  // Not for pulls or inits.
  EXPECT_EQ(WireBytesPerElement(v1::DTYPE_INT8), 0u);
  EXPECT_EQ(PayloadBytes(v1::DTYPE_INT8, 0, 512), 520u);
  EXPECT_EQ(PayloadBytes(v1::DTYPE_BF16, 7, 512), 1024u);
}

}  // namespace
}  // namespace spotps
