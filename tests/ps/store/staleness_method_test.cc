// The async staleness methods: step sizes, flag parsing and validation, and
// delay-compensated AdamW against the formula computed here in double.
#include "ps/store/staleness_method.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "ps/store/optimizer.h"

namespace spotps {
namespace {

TEST(StalenessMethodTest, ParsesNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseStalenessMethod("none"), StalenessMethod::kNone);
  EXPECT_EQ(*ParseStalenessMethod("lr"), StalenessMethod::kLrScale);
  EXPECT_EQ(*ParseStalenessMethod("dc"), StalenessMethod::kDelayCompensated);
  EXPECT_EQ(ParseStalenessMethod("DC").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StalenessMethodName(StalenessMethod::kDelayCompensated), "dc");
  EXPECT_EQ(DescribeStaleness({StalenessMethod::kDelayCompensated, 2.0f}), "dc(lambda=2)");
}

TEST(StalenessMethodTest, ParsesJoinedSpecsAndRefusesBadOnes) {
  StalenessConfig c;
  ASSERT_TRUE(ParseStalenessSpec("dc+avg+warmup", &c).ok());
  EXPECT_EQ(c.method, StalenessMethod::kDelayCompensated);
  EXPECT_TRUE(c.average);
  EXPECT_TRUE(c.worker_warmup);
  ASSERT_TRUE(ParseStalenessSpec("avg", &c).ok());
  EXPECT_EQ(c.method, StalenessMethod::kNone);
  EXPECT_TRUE(c.average);
  EXPECT_FALSE(c.worker_warmup);
  EXPECT_EQ(DescribeStaleness(c), "none+avg(k=live,wait=1000ms)");
  EXPECT_FALSE(c.fresh);
  // "fresh" implies "avg", alone or next to it, in either order.
  for (const char* fresh : {"fresh", "avg+fresh", "fresh+avg"}) {
    ASSERT_TRUE(ParseStalenessSpec(fresh, &c).ok()) << fresh;
    EXPECT_TRUE(c.average && c.fresh) << fresh;
    EXPECT_EQ(DescribeStaleness(c), "none+avg(k=live,wait=1000ms)+fresh") << fresh;
  }
  c.share_of_k = true;  // Local rounds say that they wait for a share of a round.
  EXPECT_EQ(DescribeStaleness(c), "none+avg(k=live,wait=max(1000ms,round/4),sum/k)+fresh");
  // That share: the configured wait at least, a quarter of the median
  // round beyond it, at most 10 s unless configured longer.
  EXPECT_EQ(LocalRoundWait(c, absl::Seconds(2)), absl::Seconds(1));
  EXPECT_EQ(LocalRoundWait(c, absl::Seconds(8)), absl::Seconds(2));
  EXPECT_EQ(LocalRoundWait(c, absl::Minutes(5)), absl::Seconds(10));
  c.average_wait_ms = 20000;
  EXPECT_EQ(LocalRoundWait(c, absl::Minutes(5)), absl::Seconds(20));
  c.average_wait_ms = 1000;
  // The update a new worker's first push opens waits up to a round more
  // (that part at most 10 s); while no round is known, as any update.
  auto waits = [&](absl::Duration round) {
    const AveragingWaits w = AveragingWaitsFor(c, round);
    return std::make_pair(w.update, w.new_workers_round);
  };
  EXPECT_EQ(waits(absl::Seconds(8)), std::make_pair(absl::Seconds(2), absl::Seconds(10)));
  EXPECT_EQ(waits(absl::Minutes(5)), std::make_pair(absl::Seconds(10), absl::Seconds(20)));
  EXPECT_EQ(waits(absl::ZeroDuration()), std::make_pair(absl::Seconds(1), absl::Seconds(1)));
  c.share_of_k = false;  // Elsewhere both are average_wait_ms.
  EXPECT_EQ(waits(absl::Seconds(8)), std::make_pair(absl::Seconds(1), absl::Seconds(1)));
  ASSERT_TRUE(ParseStalenessSpec("momentum", &c).ok());
  EXPECT_EQ(c.method, StalenessMethod::kMomentum);
  EXPECT_FALSE(c.average);
  EXPECT_FALSE(c.fresh);
  for (const char* bad :
       {"dc+lr", "avg+avg", "", "dc+", "avg+Warmup", "momentum+x", "fresh+fresh", "Fresh"}) {
    StalenessConfig unchanged;
    unchanged.average = true;
    EXPECT_EQ(ParseStalenessSpec(bad, &unchanged).code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_TRUE(unchanged.average) << bad;  // Left as it was.
  }
  // "delayed" stands alone, and only in local mode (share_of_k), under SGD.
  ASSERT_TRUE(ParseStalenessSpec("delayed", &c).ok());
  EXPECT_TRUE(c.delayed_nesterov);
  EXPECT_FALSE(c.average);
  EXPECT_EQ(ValidateStalenessConfig(c, false).code(), absl::StatusCode::kInvalidArgument);
  c.share_of_k = true;
  EXPECT_TRUE(ValidateStalenessConfig(c, false).ok());
  EXPECT_EQ(ValidateStalenessConfig(c, true).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ParseStalenessSpec("fresh", &c).ok());
  EXPECT_FALSE(c.delayed_nesterov);
  for (const char* bad : {"delayed+avg", "fresh+delayed", "delayed+delayed", "none+delayed"}) {
    EXPECT_EQ(ParseStalenessSpec(bad, &c).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  c = StalenessConfig();
  c.average_pushes = -1;
  EXPECT_FALSE(ValidateStalenessConfig(c, true).ok());
  c = StalenessConfig();
  c.average_wait_ms = 0;
  EXPECT_FALSE(ValidateStalenessConfig(c, true).ok());
  c = StalenessConfig();
  c.method = StalenessMethod::kMomentum;
  EXPECT_TRUE(ValidateStalenessConfig(c, false).ok());  // SGD: its momentum.
}

TEST(StalenessMethodTest, ValidatesLambdaAndOptimizer) {
  EXPECT_TRUE(ValidateStalenessConfig({StalenessMethod::kDelayCompensated, 0.5f}, true).ok());
  EXPECT_FALSE(ValidateStalenessConfig({StalenessMethod::kDelayCompensated, 0.5f}, false).ok());
  EXPECT_FALSE(ValidateStalenessConfig({StalenessMethod::kNone, -1.0f}, true).ok());
  EXPECT_FALSE(ValidateStalenessConfig({StalenessMethod::kNone, NAN}, true).ok());
  EXPECT_TRUE(ValidateStalenessConfig({StalenessMethod::kLrScale, 1.0f}, false).ok());
}

TEST(StalenessMethodTest, PlansTheStep) {
  EXPECT_DOUBLE_EQ(PlanStalenessStep({StalenessMethod::kNone, 1.0f}, 0.3, 5).lr, 0.3);
  EXPECT_DOUBLE_EQ(PlanStalenessStep({StalenessMethod::kLrScale, 1.0f}, 0.3, 2).lr, 0.1);
  const StalenessStep dc = PlanStalenessStep({StalenessMethod::kDelayCompensated, 0.5f}, 0.3, 4);
  EXPECT_DOUBLE_EQ(dc.lr, 0.3);
  EXPECT_FLOAT_EQ(dc.compensation, 2.0f);
  EXPECT_EQ(PlanStalenessStep({StalenessMethod::kDelayCompensated, 0.5f}, 0.3, 0).compensation,
            0.0f);
}

// Two AdamW steps; the second delay-compensated by `factor`. Returns the
// weights; `reference` gets the same computed in double from the formula.
std::vector<float> TwoSteps(float factor, const std::vector<float>& g1,
                            const std::vector<float>& g2, std::vector<double>* reference) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  const Optimizer opt(c);
  const int64_t n = static_cast<int64_t>(g1.size());
  std::vector<float> w(n, 0.5f), m(n, 0.0f), v(n, 0.0f);
  float* state[2] = {m.data(), v.data()};
  const float lr = 0.01f;
  opt.Apply(w.data(), state, GradientView{v1::DTYPE_FP32, g1.data()}, n, lr, 1, factor);
  opt.Apply(w.data(), state, GradientView{v1::DTYPE_FP32, g2.data()}, n, lr, 2, factor);
  reference->assign(n, 0.0);
  const double b1 = c.beta1, b2 = c.beta2, eps = c.eps;
  for (int64_t i = 0; i < n; ++i) {
    double wi = 0.5, mi = (1 - b1) * g1[i], vi = (1 - b2) * g1[i] * g1[i];
    wi -= lr / (1 - b1) * (mi / (std::sqrt(vi / (1 - b2)) + eps));
    const double rms = std::sqrt(vi / (1 - b2)) + eps;
    const double last_update = -1.0 / (1 - b1) * mi / rms;  // In units of lr.
    const double g = g2[i] + factor * g2[i] * g2[i] / rms * last_update;
    mi = b1 * mi + (1 - b1) * g;
    vi = b2 * vi + (1 - b2) * g * g;
    wi -= lr / (1 - b1 * b1) * (mi / (std::sqrt(vi / (1 - b2 * b2)) + eps));
    (*reference)[i] = wi;
  }
  return w;
}

TEST(DelayCompensatedAdamWTest, MatchesTheFormulaAndIsPlainWithoutCompensation) {
  const std::vector<float> g1 = {0.5f, -0.25f, 1.0f, 0.0f, 2.0f};
  const std::vector<float> g2 = {0.4f, 0.3f, -1.0f, 0.1f, 2.0f};
  std::vector<double> ref;
  const std::vector<float> compensated = TwoSteps(3.0f, g1, g2, &ref);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(compensated[i], ref[i], 1e-5) << i;
  std::vector<double> plain_ref;
  const std::vector<float> plain = TwoSteps(0.0f, g1, g2, &plain_ref);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(plain[i], plain_ref[i], 1e-5) << i;
  // The compensation changed the step where the gradient is not zero.
  EXPECT_NE(compensated[0], plain[0]);
  EXPECT_NE(compensated[2], plain[2]);
}

}  // namespace
}  // namespace spotps
