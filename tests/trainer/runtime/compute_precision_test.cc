#include "trainer/runtime/compute_precision.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace spotps {
namespace {

TEST(ComputePrecisionTest, DTypeNamesRoundTrip) {
  for (ComputeDType dtype : {ComputeDType::kBF16, ComputeDType::kFP32}) {
    absl::StatusOr<ComputeDType> parsed = ParseComputeDType(ComputeDTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(ComputeDTypeName(ComputeDType::kBF16), "bf16");
  EXPECT_EQ(ParseComputeDType("fp16").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ComputePrecisionTest, ScopeSetsAndRestoresAutocast) {
  ASSERT_FALSE(at::autocast::is_cpu_enabled());
  {
    ComputePrecisionScope bf16(ComputeDType::kBF16);
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
    EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), at::kBFloat16);
    {
      ComputePrecisionScope fp32(ComputeDType::kFP32);
      EXPECT_FALSE(at::autocast::is_cpu_enabled());
    }
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
}

TEST(ComputePrecisionTest, Bf16ScopeRunsLinearInBf16) {
  torch::nn::Linear linear(8, 8);
  const torch::Tensor x = torch::ones({2, 8});
  {
    ComputePrecisionScope bf16(ComputeDType::kBF16);
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
  }
  ComputePrecisionScope fp32(ComputeDType::kFP32);
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat);
}

// Autocast caches the BF16 copy of each FP32 weight. Without clearing it at
// scope exit, the second scope would still compute with the old weights.
TEST(ComputePrecisionTest, WeightUpdateBetweenScopesIsSeen) {
  torch::nn::Linear linear(8, 8);
  const torch::Tensor x = torch::ones({1, 8});
  torch::Tensor before;
  {
    ComputePrecisionScope bf16(ComputeDType::kBF16);
    before = linear(x).to(torch::kFloat);
  }
  {
    torch::NoGradGuard no_grad;
    linear->weight.add_(1.0);  // An optimizer step, in place.
  }
  torch::Tensor after;
  {
    ComputePrecisionScope bf16(ComputeDType::kBF16);
    after = linear(x).to(torch::kFloat);
  }
  // Each output grows by the sum of 8 ones times the +1 weight shift.
  EXPECT_TRUE(torch::allclose(after - before, torch::full({1, 8}, 8.0),
                              /*rtol=*/0.0, /*atol=*/0.1))
      << after - before;
}

}  // namespace
}  // namespace spotps
