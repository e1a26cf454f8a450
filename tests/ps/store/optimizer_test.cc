// The shard's optimizers against LibTorch's own on the same gradients.
#include "ps/store/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>

#include "common/tensor_codec.h"
#include "ps/store/learning_rate_schedule.h"

namespace spotps {
namespace {

constexpr int64_t kElements = 4099;  // Not a multiple of any vector width.
constexpr int kSteps = 100;

struct Case {
  std::string name;
  OptimizerConfig config;
  v1::DType grad_dtype;
};

std::unique_ptr<torch::optim::Optimizer> TorchOptimizer(const OptimizerConfig& c, torch::Tensor p,
                                                        double lr) {
  if (c.kind == OptimizerKind::kSgd) {
    return std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{p},
                                               torch::optim::SGDOptions(lr)
                                                   .momentum(c.momentum)
                                                   .dampening(c.dampening)
                                                   .nesterov(c.nesterov)
                                                   .weight_decay(c.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{p},
                                               torch::optim::AdamWOptions(lr)
                                                   .betas({c.beta1, c.beta2})
                                                   .eps(c.eps)
                                                   .weight_decay(c.weight_decay));
}

void SetTorchLr(torch::optim::Optimizer& opt, OptimizerKind kind, double lr) {
  auto& options = opt.param_groups()[0].options();
  if (kind == OptimizerKind::kSgd) {
    static_cast<torch::optim::SGDOptions&>(options).lr(lr);
  } else {
    static_cast<torch::optim::AdamWOptions&>(options).lr(lr);
  }
}

class OptimizerVsTorchTest : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerVsTorchTest, AgreesForOneHundredSteps) {
  const Case& c = GetParam();
  torch::manual_seed(1);
  torch::Tensor reference = torch::randn({kElements}).requires_grad_(true);
  std::vector<float> weights(reference.data_ptr<float>(), reference.data_ptr<float>() + kElements);
  const Optimizer ours(c.config);
  std::vector<std::vector<float>> state(ours.state_slots(), std::vector<float>(kElements, 0.0f));
  float* slots[2] = {state.size() > 0 ? state[0].data() : nullptr,
                     state.size() > 1 ? state[1].data() : nullptr};

  ScheduleConfig sc;
  sc.base_lr = c.config.kind == OptimizerKind::kSgd ? 0.05 : 0.01;
  sc.decay = DecayKind::kCosine;
  sc.warmup_steps = 10;
  sc.total_steps = kSteps;
  sc.min_lr_ratio = 0.1;
  auto schedule = LearningRateSchedule::Create(sc);
  ASSERT_TRUE(schedule.ok());
  auto torch_opt = TorchOptimizer(c.config, reference, sc.base_lr);

  std::mt19937 rng(42);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> grad(kElements);
  std::string wire;
  for (int step = 1; step <= kSteps; ++step) {
    for (float& g : grad) g = noise(rng);
    wire.clear();
    AppendEncoded(grad.data(), kElements, c.grad_dtype, &wire);
    // Torch sees exactly the values the shard decodes from the wire.
    std::vector<float> decoded(kElements);
    ASSERT_TRUE(DecodeToFp32(c.grad_dtype, wire, kElements, decoded.data()).ok());
    const double lr = schedule->At(step - 1);
    reference.mutable_grad() = torch::from_blob(decoded.data(), {kElements}).clone();
    SetTorchLr(*torch_opt, c.config.kind, lr);
    torch_opt->step();
    ours.Apply(weights.data(), slots, GradientView{c.grad_dtype, wire.data()}, kElements,
               static_cast<float>(lr), step);
  }
  const float* expected = reference.data_ptr<float>();
  double worst = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    const double scale = std::max(std::abs(static_cast<double>(expected[i])), 1e-2);
    worst = std::max(worst, std::abs(weights[i] - expected[i]) / scale);
  }
  EXPECT_LE(worst, 1e-5) << c.name;
  // The run really moved the weights (a no-op optimizer must not pass).
  torch::manual_seed(1);
  EXPECT_GT((torch::randn({kElements}) - reference.detach()).abs().max().item<float>(), 1e-2);
}

OptimizerConfig Sgd(float momentum, bool nesterov, float wd, float dampening = 0) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  c.dampening = dampening;
  return c;
}

OptimizerConfig AdamW(float wd, float beta1 = 0.9f, float beta2 = 0.999f) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.weight_decay = wd;
  c.beta1 = beta1;
  c.beta2 = beta2;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    AllRules, OptimizerVsTorchTest,
    ::testing::Values(Case{"sgd", Sgd(0, false, 0), v1::DTYPE_FP32},
                      Case{"sgd_momentum_wd", Sgd(0.9f, false, 1e-3f), v1::DTYPE_FP32},
                      Case{"sgd_dampening", Sgd(0.9f, false, 0, 0.3f), v1::DTYPE_BF16},
                      Case{"sgd_nesterov", Sgd(0.9f, true, 1e-3f), v1::DTYPE_BF16},
                      Case{"adamw", AdamW(0.01f), v1::DTYPE_FP32},
                      Case{"adamw_bf16_grads", AdamW(0.1f, 0.8f, 0.95f), v1::DTYPE_BF16}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(OptimizerConfigTest, RejectsNonsense) {
  EXPECT_FALSE(ValidateOptimizerConfig(Sgd(1.5f, false, 0)).ok());
  EXPECT_FALSE(ValidateOptimizerConfig(Sgd(0.0f, true, 0)).ok());
  EXPECT_FALSE(ValidateOptimizerConfig(Sgd(0.5f, false, -1.0f)).ok());
  EXPECT_FALSE(ValidateOptimizerConfig(AdamW(0.0f, 1.0f)).ok());
  OptimizerConfig no_eps = AdamW(0.0f);
  no_eps.eps = 0;
  EXPECT_FALSE(ValidateOptimizerConfig(no_eps).ok());
  EXPECT_TRUE(ValidateOptimizerConfig(AdamW(0.01f)).ok());
  EXPECT_FALSE(ParseOptimizerKind("adam").ok());
}

}  // namespace
}  // namespace spotps
