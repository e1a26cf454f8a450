#include "common/model_layout.h"

#include <gtest/gtest.h>

namespace spotps {
namespace {

TEST(ModelLayoutTest, LaysTensorsEndToEnd) {
  auto layout = ModelLayout::Create({{"a", {2, 3}}, {"b", {4}}, {"c", {1, 1, 5}}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->tensors().size(), 3u);
  EXPECT_EQ(layout->tensors()[0].flat_offset, 0);
  EXPECT_EQ(layout->tensors()[1].flat_offset, 6);
  EXPECT_EQ(layout->tensors()[2].flat_offset, 10);
  EXPECT_EQ(layout->total_elements(), 15);
  EXPECT_EQ(layout->Find("b")->num_elements, 4);
  EXPECT_EQ(layout->Find("zzz"), nullptr);
}

TEST(ModelLayoutTest, FingerprintDependsOnNamesAndShapes) {
  auto base = ModelLayout::Create({{"a", {2, 3}}, {"b", {4}}});
  auto same = ModelLayout::Create({{"a", {2, 3}}, {"b", {4}}});
  auto reshaped = ModelLayout::Create({{"a", {3, 2}}, {"b", {4}}});
  auto renamed = ModelLayout::Create({{"a", {2, 3}}, {"c", {4}}});
  ASSERT_TRUE(base.ok() && same.ok() && reshaped.ok() && renamed.ok());
  EXPECT_EQ(base->fingerprint(), same->fingerprint());
  EXPECT_NE(base->fingerprint(), reshaped->fingerprint());
  EXPECT_NE(base->fingerprint(), renamed->fingerprint());
}

TEST(ModelLayoutTest, ProtoRoundTrip) {
  auto layout = ModelLayout::Create({{"w", {8, 8}}, {"b", {8}}});
  ASSERT_TRUE(layout.ok());
  auto back = ModelLayout::FromProto(layout->ToProto());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->fingerprint(), layout->fingerprint());
  EXPECT_EQ(back->total_elements(), 72);
}

TEST(ModelLayoutTest, RejectsBadLayouts) {
  EXPECT_EQ(ModelLayout::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{"", {1}}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{"a", {1}}, {"a", {2}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{"a", {0}}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{"a", {-3}}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{"bad name", {1}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Overflowing products must not wrap around into a small model.
  EXPECT_EQ(ModelLayout::Create({{"huge", {int64_t{1} << 32, int64_t{1} << 32}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::ModelLayout proto;
  auto* t = proto.add_tensors();
  t->set_name("x");
  t->add_shape(4);
  t->set_dtype(v1::DTYPE_BF16);
  auto s = ModelLayout::FromProto(proto).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("DTYPE_FP32"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace spotps
