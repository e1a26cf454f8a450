// Int8ErrorFeedback against the int8 block codec: what the shards decode
// over many pushes adds up to the gradients pushed, less the residual the
// trainer still holds, and a value too small for its block's int8 step
// still gets through over time instead of rounding to zero every push.
#include "trainer/elastic/int8_error_feedback.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/int8_blocks.h"
#include "common/model_layout.h"

namespace spotps {
namespace {

// What a shard decodes of `gradient`: each partition's int8 blocks.
std::vector<float> Decoded(const PartitionMap& map, const std::vector<float>& gradient) {
  std::vector<float> out(gradient.size());
  for (const Partition& p : map.partitions()) {
    RoundTripInt8Blocks(gradient.data() + p.flat_begin, 0, p.num_elements,
                        out.data() + p.flat_begin);
  }
  return out;
}

TEST(Int8ErrorFeedbackTest, DecodedSumIsTheGradientsLessTheResidual) {
  const ModelLayout layout = *ModelLayout::Create({{"w", {40, 100}}, {"b", {300}}});
  const PartitionMap map = *PartitionMap::Create(layout, 2);
  const size_t n = static_cast<size_t>(layout.total_elements());
  Int8ErrorFeedback feedback(map);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<double> pushed(n, 0.0), received(n, 0.0), plain(n, 0.0);
  for (int t = 0; t < 30; ++t) {
    std::vector<float> g(n);
    for (float& x : g) x = normal(rng) * std::exp(2 * normal(rng));
    for (size_t i = 0; i < n; ++i) pushed[i] += g[i];
    const std::vector<float> without = Decoded(map, g);
    for (size_t i = 0; i < n; ++i) plain[i] += without[i];
    feedback.Compensate(absl::MakeSpan(g));
    const std::vector<float> decoded = Decoded(map, g);
    for (size_t i = 0; i < n; ++i) received[i] += decoded[i];
  }
  // received = pushed - residual: the residual is what is still owed.
  double owed = 0, error_with = 0, error_without = 0;
  for (size_t i = 0; i < n; ++i) {
    error_with += (pushed[i] - received[i]) * (pushed[i] - received[i]);
    error_without += (pushed[i] - plain[i]) * (pushed[i] - plain[i]);
  }
  owed = feedback.ResidualNorm();
  EXPECT_NEAR(std::sqrt(error_with), owed, 1e-3 * owed + 1e-6);
  // Without feedback the rounding errors of 30 pushes pile up.
  EXPECT_GT(std::sqrt(error_without), 3 * owed);
}

TEST(Int8ErrorFeedbackTest, AValueBelowItsBlocksStepGetsThroughOverTime) {
  const ModelLayout layout = *ModelLayout::Create({{"w", {256}}});
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  Int8ErrorFeedback feedback(map);
  // Element 0 sets the block's step to 100 / 127; element 1 is an eighth of it.
  double small_received = 0, small_plain = 0;
  for (int t = 0; t < 100; ++t) {
    std::vector<float> g(256, 0.0f);
    g[0] = 100.0f;
    g[1] = 0.1f;
    small_plain += Decoded(map, g)[1];
    feedback.Compensate(absl::MakeSpan(g));
    small_received += Decoded(map, g)[1];
  }
  EXPECT_EQ(small_plain, 0.0);  // Rounded away every time.
  EXPECT_NEAR(small_received, 10.0, 100.0 / 127);
}

}  // namespace
}  // namespace spotps
