// The shard's optimizers against LibTorch's own on the same gradients.
#include "ps/store/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
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

// Delayed Nesterov against LibTorch's Nesterov SGD: rounds of k updates,
// the last of each stepping the momentum, move the weights as one torch
// step on the sum of the round's gradients does, when every gradient of a
// round is taken at the weights the round started from (a synchronous
// round, as LocalRounds would average it).
TEST(DelayedNesterovTest, ARoundOfKUpdatesIsOneTorchNesterovStepOnTheirSum) {
  constexpr int kRounds = 20;
  constexpr int kPerRound = 3;
  const float lr = 0.05f;
  OptimizerConfig c = Sgd(0.9f, true, 0);
  torch::manual_seed(3);
  torch::Tensor reference = torch::randn({kElements}).requires_grad_(true);
  std::vector<float> weights(reference.data_ptr<float>(), reference.data_ptr<float>() + kElements);
  auto torch_opt = TorchOptimizer(c, reference, lr);
  c.delayed_momentum = true;
  const Optimizer ours(c);
  ASSERT_EQ(ours.state_slots(), 2);
  std::vector<std::vector<float>> state(2, std::vector<float>(kElements, 0.0f));
  float* slots[2] = {state[0].data(), state[1].data()};
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  uint64_t step = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<float> sum(kElements, 0.0f);
    for (int i = 0; i < kPerRound; ++i) {
      std::vector<float> grad(kElements);
      for (float& g : grad) g = noise(rng);
      for (int64_t e = 0; e < kElements; ++e) sum[e] += grad[e];
      const MomentumPhase phase =
          i + 1 == kPerRound ? MomentumPhase::kApplyDeferred : MomentumPhase::kDefer;
      ours.Apply(weights.data(), slots, GradientView{v1::DTYPE_FP32, grad.data()}, kElements, lr,
                 ++step, 0.0f, -1.0f, phase);
    }
    reference.mutable_grad() = torch::from_blob(sum.data(), {kElements}).clone();
    torch_opt->step();
  }
  const float* expected = reference.data_ptr<float>();
  double worst = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    const double scale = std::max(std::abs(static_cast<double>(expected[i])), 1e-2);
    worst = std::max(worst, std::abs(weights[i] - expected[i]) / scale);
  }
  EXPECT_LE(worst, 1e-4);
  // Nothing is left deferred after a round's last update.
  EXPECT_EQ(*std::max_element(state[1].begin(), state[1].end()), 0.0f);
  // The run moved the weights.
  torch::manual_seed(3);
  EXPECT_GT((torch::randn({kElements}) - reference.detach()).abs().max().item<float>(), 1e-2);
}

// Local rounds' short updates (round_share < 1): a round whose pushes
// arrive in two updates, each applying its half with round_share 0.5,
// moves the weights and the momentum about as one whole update does.
// Stepping the momentum fully each time (the old behaviour, round_share 1
// twice) adds its carried term twice: ~1.7x as far at mu = 0.9. The
// gradients keep a direction, as a pseudo-gradient of real training does,
// so the buffer is near its steady state.
TEST(SgdRoundShareTest, ARoundSplitInTwoHalvesMovesAsOneWholeUpdate) {
  constexpr int64_t kN = 257;
  const float lr = 0.01f;
  for (const bool nesterov : {true, false}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "heavy ball");
    const Optimizer ours(Sgd(0.9f, nesterov, 0));
    std::vector<float> weights(kN, 0.0f), buf(kN, 0.0f);
    std::mt19937 rng(5);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    auto gradient = [&] {
      std::vector<float> g(kN);
      for (int64_t i = 0; i < kN; ++i) g[i] = (i % 2 == 0 ? 1.0f : -0.5f) + noise(rng);
      return g;
    };
    uint64_t step = 0;
    for (int round = 0; round < 60; ++round) {
      float* state[1] = {buf.data()};
      const std::vector<float> g = gradient();
      ours.Apply(weights.data(), state, GradientView{v1::DTYPE_FP32, g.data()}, kN, lr, ++step);
    }
    const std::vector<float> g = gradient();
    // Applies the round from here as `parts` updates of g / parts at
    // `share` each, into w and b.
    auto run = [&](int parts, float share, std::vector<float>& w, std::vector<float>& b) {
      w = weights;
      b = buf;
      float* state[1] = {b.data()};
      uint64_t s = step;
      for (int part = 0; part < parts; ++part) {
        ours.Apply(w.data(), state, GradientView{v1::DTYPE_FP32, g.data(), 1.0f / parts}, kN, lr,
                   ++s, 0.0f, -1.0f, MomentumPhase::kEveryUpdate, share);
      }
    };
    // Norms of how far w moved from here, and of w's and b's gaps to the
    // whole update's.
    struct Moved {
      double weights, weights_gap, buffer_gap;
    };
    std::vector<float> whole_w, whole_b;
    auto moved = [&](const std::vector<float>& w, const std::vector<float>& b) {
      Moved m{0, 0, 0};
      for (int64_t i = 0; i < kN; ++i) {
        m.weights += std::pow(w[i] - weights[i], 2);
        m.weights_gap += std::pow(w[i] - whole_w[i], 2);
        m.buffer_gap += std::pow(b[i] - whole_b[i], 2);
      }
      return Moved{std::sqrt(m.weights), std::sqrt(m.weights_gap), std::sqrt(m.buffer_gap)};
    };
    run(1, 1.0f, whole_w, whole_b);
    const Moved whole = moved(whole_w, whole_b);
    std::vector<float> w, b;
    run(2, 0.5f, w, b);
    const Moved halves = moved(w, b);
    EXPECT_LE(halves.weights_gap, 0.03 * whole.weights);
    EXPECT_LE(halves.buffer_gap, 0.03 * std::sqrt(std::inner_product(whole_b.begin(), whole_b.end(),
                                                                     whole_b.begin(), 0.0)));
    run(2, 1.0f, w, b);
    EXPECT_GE(moved(w, b).weights, 1.5 * whole.weights);
    // A share just under 1 takes the share kernel: it agrees with the whole
    // step's.
    run(1, 0.999999f, w, b);
    EXPECT_LE(moved(w, b).weights_gap, 1e-5 * whole.weights);
  }
}

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
  // Delayed momentum is Nesterov SGD's.
  OptimizerConfig delayed = Sgd(0.9f, true, 0);
  delayed.delayed_momentum = true;
  EXPECT_TRUE(ValidateOptimizerConfig(delayed).ok());
  delayed.nesterov = false;
  EXPECT_FALSE(ValidateOptimizerConfig(delayed).ok());
  OptimizerConfig delayed_adamw = AdamW(0.0f);
  delayed_adamw.delayed_momentum = true;
  EXPECT_FALSE(ValidateOptimizerConfig(delayed_adamw).ok());
}

}  // namespace
}  // namespace spotps
