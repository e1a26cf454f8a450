// InnerAdamW against LibTorch's AdamW: the same weights after several steps
// of the same gradients, weight decay and bias correction included.
#include "trainer/elastic/inner_adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace spotps {
namespace {

TEST(InnerAdamWTest, MatchesTorchAdamWStepForStep) {
  constexpr int kElements = 1000, kSteps = 5;
  InnerAdamWOptions options;
  options.lr = 0.01f;
  options.weight_decay = 0.1f;
  torch::manual_seed(7);
  torch::Tensor reference = torch::randn({kElements});
  std::vector<float> weights(reference.data_ptr<float>(), reference.data_ptr<float>() + kElements);
  const std::vector<float> initial = weights;
  reference.set_requires_grad(true);
  torch::optim::AdamW torch_adamw({reference}, torch::optim::AdamWOptions(options.lr)
                                                   .betas({options.beta1, options.beta2})
                                                   .eps(options.eps)
                                                   .weight_decay(options.weight_decay));
  InnerAdamW mine(kElements, options);
  for (int step = 0; step < kSteps; ++step) {
    torch::Tensor gradient = torch::randn({kElements}) * (step + 1);
    reference.mutable_grad() = gradient.clone();
    torch_adamw.step();
    mine.Step(absl::MakeSpan(weights), absl::MakeConstSpan(gradient.data_ptr<float>(), kElements));
  }
  EXPECT_EQ(mine.steps(), kSteps);
  const float* expected = reference.data_ptr<float>();
  double moved = 0;
  for (int i = 0; i < kElements; ++i) {
    ASSERT_NEAR(weights[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i]))) << i;
    moved += std::fabs(weights[i] - initial[i]);
  }
  EXPECT_GT(moved / kElements, 0.01);  // About lr per step: the steps did move them.
}

}  // namespace
}  // namespace spotps
