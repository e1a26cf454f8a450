// Pushing during backward (--push_during_backward, the default) against the
// whole push after it, with real trainer and shard processes: the same job
// ends on the same weights, bit for bit without clipping (the partitions
// carry the same BF16 values, only earlier), and with clipping within BF16
// rounding of the whole push's weights (the streamed push's factor travels
// as gradient_scale, applied by the shard).
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;

// Trains --steps on two fresh shards (SGD: an update is linear in the
// gradient) and returns the weights they end with.
std::vector<float> TrainAndPull(const std::string& dir, const std::string& tokens,
                                bool push_during_backward, double clip_norm) {
  const std::string name = absl::StrCat(dir, "/run-", push_during_backward, "-", clip_norm);
  auto shards = testing::LocalShardCluster::Start(2, {"--optimizer=sgd", "--lr=0.05"}, dir);
  EXPECT_TRUE(shards.ok()) << shards.status();
  if (!shards.ok()) return {};
  // One thread: the same step is the same numbers on every run.
  auto trainer = ChildProcess::Start(
      {BinaryPath("spotps-trainer"), "--ps=" + (*shards)->addresses(), "--coordinator=none",
       "--model=tiny", "--data=" + tokens, "--batch=4", "--seq_len=32", "--threads=1",
       "--steps=6", "--log_every=0", "--eval_batches=0", absl::StrCat("--clip_norm=", clip_norm),
       absl::StrCat("--push_during_backward=", push_during_backward ? "true" : "false")},
      name + ".log");
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  auto code = (*trainer)->Wait(absl::Seconds(120));
  EXPECT_TRUE(code.ok() && *code == 0) << ReadFile(name + ".log").value_or("");
  auto cluster = Cluster::Connect((*shards)->addresses());
  EXPECT_TRUE(cluster.ok());
  EXPECT_TRUE((*cluster)->FetchLayout().ok());
  WeightSnapshot w;
  EXPECT_TRUE((*cluster)->Pull(v1::DTYPE_FP32, &w).ok());
  for (uint64_t v : w.versions) EXPECT_EQ(v, 6u);  // Every step applied once.
  return w.values;
}

double Distance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum);
}

TEST(BackwardPushTest, StreamedAndWholePushesEndOnTheSameWeights) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const std::vector<float> whole = TrainAndPull(dir.path(), *tokens, false, 0);
  const std::vector<float> streamed = TrainAndPull(dir.path(), *tokens, true, 0);
  ASSERT_FALSE(whole.empty());
  ASSERT_EQ(streamed.size(), whole.size());
  EXPECT_EQ(Distance(streamed, whole), 0.0);

  // Clipping hard enough that every step is clipped.
  const std::vector<float> whole_clipped = TrainAndPull(dir.path(), *tokens, false, 0.05);
  const std::vector<float> streamed_clipped = TrainAndPull(dir.path(), *tokens, true, 0.05);
  ASSERT_EQ(streamed_clipped.size(), whole.size());
  const double clipping = Distance(whole_clipped, whole);
  const double difference = Distance(streamed_clipped, whole_clipped);
  EXPECT_GT(clipping, 0.0);
  EXPECT_LT(difference, 0.05 * clipping) << "clipping moved " << clipping;
}

}  // namespace
}  // namespace spotps
