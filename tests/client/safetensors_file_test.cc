#include "client/safetensors_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/little_endian.h"

namespace spotps {
namespace {

using ::testing::HasSubstr;

// A file from a header text and data bytes, as any writer would lay it out.
std::string FileOf(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  EncodeU64(out.data(), header.size());
  return out + header + data;
}

std::string Floats(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

SafetensorsContents TwoTensors() {
  SafetensorsContents c;
  c.tensors.push_back({"a", {2, 3}, SafetensorsDType::kF32, {1, -2, 3.5f, 1e-30f, -0.0f, 7}});
  c.tensors.push_back({"b.bias",
                       {4},
                       SafetensorsDType::kF32,
                       {std::numeric_limits<float>::denorm_min(), 1.0f / 3, 65504, -1e20f}});
  c.metadata["format"] = "pt";
  c.metadata["spotps.global_step"] = "17";
  return c;
}

void ExpectBitExact(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST(SafetensorsFile, Fp32RoundTripIsBitExact) {
  const SafetensorsContents in = TwoTensors();
  absl::StatusOr<std::string> bytes = SerializeSafetensors(in, SafetensorsDType::kF32);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((8 + DecodeU64(bytes->data())) % 8, 0u) << "data section not 8-byte aligned";
  absl::StatusOr<SafetensorsContents> out = ParseSafetensors(*bytes);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->tensors.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out->tensors[i].name, in.tensors[i].name);
    EXPECT_EQ(out->tensors[i].shape, in.tensors[i].shape);
    EXPECT_EQ(out->tensors[i].file_dtype, SafetensorsDType::kF32);
    ExpectBitExact(out->tensors[i].values, in.tensors[i].values);
  }
  EXPECT_EQ(out->metadata, in.metadata);
}

TEST(SafetensorsFile, Bf16RoundsToNearestEvenAndReadsBackExactly) {
  SafetensorsContents in;
  // 1 + 2^-8 is halfway between two BF16 values: rounds to even (1.0);
  // so is 1 + 3 * 2^-8, which rounds up to 1 + 2^-6; BF16 values stay as they are.
  in.tensors.push_back(
      {"x", {4}, SafetensorsDType::kF32, {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 0.15625f}});
  absl::StatusOr<std::string> bytes = SerializeSafetensors(in, SafetensorsDType::kBF16);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_THAT(*bytes, HasSubstr("\"dtype\":\"BF16\""));
  absl::StatusOr<SafetensorsContents> out = ParseSafetensors(*bytes);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tensors[0].file_dtype, SafetensorsDType::kBF16);
  EXPECT_EQ(out->tensors[0].values, (std::vector<float>{1.0f, 1.0f + 4.0f / 256, -2.5f, 0.15625f}));
  // BF16 -> FP32 -> BF16 is the identity.
  absl::StatusOr<std::string> again = SerializeSafetensors(*out, SafetensorsDType::kBF16);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);
}

TEST(SafetensorsFile, ReadsF16) {
  // 1.0, -2.0, 65504 (max), 2^-24 (smallest subnormal) in IEEE half.
  const uint16_t half[] = {0x3c00, 0xc000, 0x7bff, 0x0001};
  std::string data(reinterpret_cast<const char*>(half), sizeof(half));
  absl::StatusOr<SafetensorsContents> out =
      ParseSafetensors(FileOf(R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})", data));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tensors[0].values, (std::vector<float>{1, -2, 65504, std::ldexp(1.0f, -24)}));
}

TEST(SafetensorsFile, ReadsTensorsInDataOrderWhateverTheHeaderOrder) {
  absl::StatusOr<SafetensorsContents> out = ParseSafetensors(
      FileOf(R"({"__metadata__":{"k":"v"},"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("a":{"dtype":"F32","shape":[],"data_offsets":[4,8]},)"
             R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]}})",
             Floats({1, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->tensors.size(), 3u);
  EXPECT_EQ(out->tensors[0].name, "z");
  EXPECT_EQ(out->tensors[1].name, "a");  // A scalar: shape [].
  EXPECT_EQ(out->tensors[1].values, std::vector<float>{2});
  EXPECT_TRUE(out->tensors[2].values.empty());
  EXPECT_EQ(out->metadata.at("k"), "v");
  EXPECT_NE(out->Find("a"), nullptr);
  EXPECT_EQ(out->Find("b"), nullptr);
}

void ExpectRefused(const std::string& bytes, const std::string& message) {
  absl::StatusOr<SafetensorsContents> out = ParseSafetensors(bytes);
  ASSERT_FALSE(out.ok()) << "accepted a file that should fail with: " << message;
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr(message));
}

const std::string kGoodHeader = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(SafetensorsFile, RefusesTruncatedFiles) {
  ExpectRefused("", "truncated: 0 bytes");
  ExpectRefused(std::string(5, '\0'), "truncated: 5 bytes");
  const std::string whole = FileOf(kGoodHeader, Floats({1, 2}));
  ExpectRefused(whole.substr(0, 8 + kGoodHeader.size() / 2), "truncated: header length");
  // Data cut short: the tensor now lies beyond the data section.
  ExpectRefused(whole.substr(0, whole.size() - 1), "outside the data section of 7 bytes");
}

TEST(SafetensorsFile, RefusesAHugeHeaderBeforeReadingIt) {
  std::string bytes(8, '\0');
  EncodeU64(bytes.data(), uint64_t{1} << 40);
  ExpectRefused(bytes + "{}", "header length 1099511627776 exceeds the limit");
  EncodeU64(bytes.data(), ~uint64_t{0});
  ExpectRefused(bytes + "{}", "exceeds the limit");
}

TEST(SafetensorsFile, RefusesHeadersThatLie) {
  const std::string d = Floats({1, 2});
  ExpectRefused(FileOf("{not json", d), "header is not valid JSON");
  ExpectRefused(FileOf("[1,2]", d), "not a JSON object");
  // Shape needs 3 floats, the offsets give 2.
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d),
                "tensor 'w': holds 8 bytes but shape and F32 need 12");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", d),
                "tensor 'w': data_offsets [0, 16] outside the data section of 8 bytes");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", d),
                "outside the data section");
  ExpectRefused(FileOf(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", d),
                "tensor 'w': dtype 'I64' is not one spotps reads");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d),
                "shape holds something other than a non-negative integer");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", d),
                "non-negative integer");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[2]}})", d), "data_offsets is not");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", d),
                "unknown field 'x'");
  ExpectRefused(FileOf(R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],)"
                       R"("data_offsets":[0,8]}})",
                       d),
                "tensor 'w'");
  ExpectRefused(FileOf(R"({"w":[1]})", d), "tensor 'w': entry is not an object");
  ExpectRefused(FileOf(R"({"__metadata__":{"step":3},)" + kGoodHeader.substr(1), d),
                "__metadata__ 'step' is not a string");
}

TEST(SafetensorsFile, RefusesOverlapsGapsAndDuplicates) {
  const std::string d = Floats({1, 2, 3, 4});
  ExpectRefused(FileOf(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       d.substr(0, 12)),
                "tensors 'a' and 'b' overlap (bytes [0, 8) and [4, 12))");
  ExpectRefused(FileOf(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                       d),
                "bytes [8, 12) of the data belong to no tensor");
  ExpectRefused(FileOf(kGoodHeader, d), "the tensors end at byte 8 but the data section has 16");
  ExpectRefused(FileOf(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                       d),
                "tensor 'a' appears twice");
}

TEST(SafetensorsFile, WriterRefusesWhatItCannotDescribe) {
  SafetensorsContents c;
  c.tensors.push_back({"a", {3}, SafetensorsDType::kF32, {1, 2}});
  EXPECT_THAT(std::string(SerializeSafetensors(c, SafetensorsDType::kF32).status().message()),
              HasSubstr("shape has 3 elements but it holds 2"));
  c.tensors[0] = {"a", {2}, SafetensorsDType::kF32, {1, 2}};
  c.tensors.push_back(c.tensors[0]);
  EXPECT_FALSE(SerializeSafetensors(c, SafetensorsDType::kF32).ok());
  EXPECT_FALSE(SerializeSafetensors(TwoTensors(), SafetensorsDType::kF16).ok());
}

TEST(SafetensorsFile, WritesAtomicallyAndNamesThePathOnErrors) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/w.safetensors");
  ASSERT_TRUE(WriteSafetensorsFile(path, TwoTensors(), SafetensorsDType::kF32).ok());
  absl::StatusOr<SafetensorsContents> back = ReadSafetensorsFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectBitExact(back->tensors[1].values, TwoTensors().tensors[1].values);
  absl::StatusOr<SafetensorsContents> missing = ReadSafetensorsFile(path + ".none");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(".none"));
}

}  // namespace
}  // namespace spotps
