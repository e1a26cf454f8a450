// End to end: 1 shard process and 2 trainer processes train the tiny model
// on generated text; the validation loss must fall well below its start.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/gpt_model.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;

TEST(TrainingE2ETest, TwoTrainersCutValidationLossByThirtyPercent) {
  testing::TempDir dir;
  auto made = testing::MakeTokenFile(dir.path(), 20000);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::string tokens_path = *made;

  // Every trainer initialises from seed 1234: this is the starting loss.
  auto data = OpenTrainingData(tokens_path, TokenFileFormat::kSpotps);
  ASSERT_TRUE(data.ok()) << data.status();
  BuiltinGptModel initial(*CreateGptModel(*GptConfigFromPreset("tiny"), 1234), "tiny");
  auto start = Evaluate(initial, **data, 8, 64, 8, ComputeDType::kFP32);
  ASSERT_TRUE(start.ok()) << start.status();
  const absl::StatusOr<double> start_loss = start->loss;

  auto shards = testing::LocalShardCluster::Start(
      1, {"--optimizer=adamw", "--lr=3e-3", "--warmup_steps=20"}, dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::vector<std::unique_ptr<ChildProcess>> trainers;
  constexpr int kSteps = 150;
  for (int i = 0; i < 2; ++i) {
    auto t = ChildProcess::Start(
        {BinaryPath("spotps-trainer"), "--ps=" + (*shards)->addresses(), "--model=tiny",
         "--data=" + tokens_path, "--batch=8", "--seq_len=64", absl::StrCat("--steps=", kSteps),
         "--threads=1", absl::StrCat("--worker_index=", i), "--log_every=50", "--eval_batches=8"},
        absl::StrCat(dir.path(), "/trainer", i, ".log"));
    ASSERT_TRUE(t.ok());
    trainers.push_back(*std::move(t));
  }
  for (int i = 0; i < 2; ++i) {
    auto code = trainers[i]->Wait(absl::Seconds(240));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string log = *ReadFile(absl::StrCat(dir.path(), "/trainer", i, ".log"));
    ASSERT_EQ(*code, 0) << log;
    EXPECT_EQ(testing::LogField(log, "steps"), kSteps) << log;
    EXPECT_NE(log.find("runtime: cpu_isa="), std::string::npos) << log;
  }

  auto gen = ChildProcess::Start({BinaryPath("spotps-generate"), "--ps=" + (*shards)->addresses(),
                                  "--model=tiny", "--data=" + tokens_path, "--batch=8",
                                  "--seq_len=64", "--eval_batches=8", "--tokens=40", "--threads=1"},
                                 dir.path() + "/generate.log");
  ASSERT_TRUE(gen.ok());
  ASSERT_EQ(*(*gen)->Wait(absl::Seconds(60)), 0);
  const std::string gen_log = *ReadFile(dir.path() + "/generate.log");
  const double final_loss = testing::LogField(gen_log, "val_loss");
  ASSERT_GT(final_loss, 0) << gen_log;
  EXPECT_LE(final_loss, 0.7 * *start_loss)
      << "start " << *start_loss << " final " << final_loss << "\n"
      << gen_log;

  auto cluster = Cluster::Connect((*shards)->addresses());
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].pushes_applied(), 2u * kSteps);  // Every gradient landed once.
}

}  // namespace
}  // namespace spotps
