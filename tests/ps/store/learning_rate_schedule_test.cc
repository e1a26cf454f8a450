#include "ps/store/learning_rate_schedule.h"

#include <gtest/gtest.h>

namespace spotps {
namespace {

LearningRateSchedule Make(DecayKind decay, int64_t warmup, int64_t total, double min_ratio) {
  ScheduleConfig c;
  c.base_lr = 1.0;
  c.decay = decay;
  c.warmup_steps = warmup;
  c.total_steps = total;
  c.min_lr_ratio = min_ratio;
  return *LearningRateSchedule::Create(c);
}

TEST(LearningRateScheduleTest, ConstantStaysAtBase) {
  const auto s = Make(DecayKind::kConstant, 0, 0, 0);
  EXPECT_DOUBLE_EQ(s.At(0), 1.0);
  EXPECT_DOUBLE_EQ(s.At(1'000'000), 1.0);
}

TEST(LearningRateScheduleTest, WarmupIsLinearThenCosineDecaysToMin) {
  const auto s = Make(DecayKind::kCosine, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(4), 0.5);
  EXPECT_DOUBLE_EQ(s.At(10), 1.0);
  EXPECT_NEAR(s.At(60), 0.55, 1e-12);  // Halfway: min + (1 - min) / 2.
  EXPECT_NEAR(s.At(110), 0.1, 1e-12);
  EXPECT_NEAR(s.At(10'000), 0.1, 1e-12);
  for (uint64_t t = 11; t < 110; ++t) EXPECT_LT(s.At(t), s.At(t - 1));
}

TEST(LearningRateScheduleTest, LinearDecay) {
  const auto s = Make(DecayKind::kLinear, 0, 100, 0.0);
  EXPECT_DOUBLE_EQ(s.At(0), 1.0);
  EXPECT_DOUBLE_EQ(s.At(25), 0.75);
  EXPECT_DOUBLE_EQ(s.At(100), 0.0);
}

TEST(LearningRateScheduleTest, RejectsBadConfigs) {
  ScheduleConfig c;
  c.base_lr = -1;
  EXPECT_FALSE(LearningRateSchedule::Create(c).ok());
  c.base_lr = 1;
  c.decay = DecayKind::kCosine;
  c.warmup_steps = 10;
  c.total_steps = 10;
  EXPECT_FALSE(LearningRateSchedule::Create(c).ok());
  EXPECT_FALSE(ParseDecayKind("exponential").ok());
}

}  // namespace
}  // namespace spotps
