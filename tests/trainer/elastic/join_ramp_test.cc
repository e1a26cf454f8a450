// The join ramp (--first_step_batch): a newly started trainer trains its
// first unit in two steps, so its first gradient reaches the shards early;
// every unit is still trained once and committed once, and each step is one
// ordinary push. A worker joining a running job builds its model without
// drawing initial weights, and such a model never initialises the shards.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "trainer/elastic/join_timeline.h"
#include "trainer/elastic/training_worker.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/gpt_config.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LogField;

constexpr int kUnits = 6, kBatch = 4, kSeqLen = 32;

class JoinRampTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokens = testing::MakeTokenFile(dir_.path(), 5000);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = *tokens;
  }

  void StartShard(std::vector<std::string> flags) {
    // The ramp is for shards that apply pushes on arrival ("fresh" has none).
    flags.insert(flags.begin(), {"--optimizer=adamw", "--lr=1e-3", "--staleness_method=none"});
    auto shards = testing::LocalShardCluster::Start(1, flags, dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
  }

  // Runs one trainer to its end; returns its log.
  std::string RunTrainer(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {BinaryPath("spotps-trainer"),
                                     "--ps=" + shards_->addresses(),
                                     "--model=tiny",
                                     "--data=" + tokens_,
                                     absl::StrCat("--batch=", kBatch),
                                     absl::StrCat("--seq_len=", kSeqLen),
                                     "--threads=1",
                                     "--eval_batches=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const std::string log = absl::StrCat(dir_.path(), "/trainer", runs_++, ".log");
    auto t = ChildProcess::Start(argv, log);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return "";
    auto code = (*t)->Wait(absl::Seconds(120));
    const std::string text = ReadFile(log).value_or("");
    EXPECT_TRUE(code.ok() && *code == 0) << text;
    return text;
  }

  uint64_t PushesApplied() {
    auto stats = (*Cluster::Connect(shards_->addresses()))->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? (*stats)[0].pushes_applied() : 0;
  }

  testing::TempDir dir_;
  std::string tokens_;
  std::unique_ptr<testing::LocalShardCluster> shards_;
  int runs_ = 0;
};

TEST_F(JoinRampTest, RampSplitsTheFirstUnitAndCommitsEveryUnitOnce) {
  StartShard({"--epochs=1", absl::StrCat("--units_per_epoch=", kUnits)});
  const std::string log = RunTrainer({"--first_step_batch=1"});
  // One more step (and push) than units: the first unit took two.
  EXPECT_EQ(LogField(log, "steps"), kUnits + 1) << log;
  EXPECT_EQ(LogField(log, "tokens"), kUnits * kBatch * kSeqLen) << log;
  EXPECT_EQ(LogField(log, "units"), kUnits) << log;
  EXPECT_EQ(LogField(log, "job_done"), 1) << log;
  EXPECT_EQ(PushesApplied(), static_cast<uint64_t>(kUnits + 1));
  auto coordinator = CoordinatorClient::Connect(shards_->addresses());
  ASSERT_TRUE(coordinator.ok());
  auto progress = (*coordinator)->Progress();
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->epochs(0).committed(), static_cast<uint64_t>(kUnits));
  EXPECT_EQ(progress->epochs(0).duplicated(), 0u);
  EXPECT_EQ(progress->epochs(0).reissued(), 0u);
  // The join line breaks the time to the first push down.
  EXPECT_NE(log.find("join: exec_s="), std::string::npos) << log;
  EXPECT_GT(LogField(log, "first_compute_s"), 0) << log;
  EXPECT_GT(LogField(log, "first_push_s"), LogField(log, "exec_s")) << log;
}

TEST_F(JoinRampTest, RampOffTrainsOneStepPerUnit) {
  StartShard({"--epochs=1", absl::StrCat("--units_per_epoch=", kUnits)});
  const std::string log = RunTrainer({"--first_step_batch=0"});
  EXPECT_EQ(LogField(log, "steps"), kUnits) << log;
  EXPECT_EQ(LogField(log, "units"), kUnits) << log;
  EXPECT_EQ(PushesApplied(), static_cast<uint64_t>(kUnits));
}

TEST_F(JoinRampTest, FreeRunningRampCountsOnlyTheTokensTrained) {
  StartShard({});
  const std::string log = RunTrainer({"--coordinator=none", "--steps=3", "--first_step_batch=1"});
  // Steps: 1 sequence, the other 3 of that unit, then a whole unit.
  EXPECT_EQ(LogField(log, "steps"), 3) << log;
  EXPECT_EQ(LogField(log, "tokens"), (1 + 3 + kBatch) * kSeqLen) << log;
  EXPECT_EQ(PushesApplied(), 3u);
}

TEST_F(JoinRampTest, JoinerSkipsDrawingWeightsAndKeepsTheShardsModel) {
  StartShard({});
  RunTrainer({"--coordinator=none", "--steps=2"});  // Initialises the model.
  auto cluster = Cluster::Connect(shards_->addresses());
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE((*cluster)->FetchLayout().ok());
  WeightSnapshot before;
  ASSERT_TRUE((*cluster)->Pull(v1::DTYPE_FP32, &before).ok());
  const std::string log = RunTrainer({"--coordinator=none", "--steps=1", "--seed=99"});
  EXPECT_NE(log.find("the shards hold the model at global step 2: training goes on"),
            std::string::npos)
      << log;
  WeightSnapshot after;
  ASSERT_TRUE((*cluster)->Pull(v1::DTYPE_FP32, &after).ok());
  // One AdamW step at lr 1e-3 from the shard's weights, not a new model
  // from seed 99 (whose weights differ by 0.1 and more).
  double max_change = 0;
  for (size_t i = 0; i < before.values.size(); ++i) {
    max_change = std::max<double>(max_change, std::abs(after.values[i] - before.values[i]));
  }
  EXPECT_GT(max_change, 0.0);
  EXPECT_LT(max_change, 0.01);
}

TEST_F(JoinRampTest, UninitialisedModelNeverInitialisesTheShards) {
  StartShard({});
  auto data = OpenTrainingData(tokens_, TokenFileFormat::kSpotps);
  ASSERT_TRUE(data.ok());
  auto config = GptConfigFromPreset("tiny");
  ASSERT_TRUE(config.ok());
  auto cluster = Cluster::Connect(shards_->addresses());
  ASSERT_TRUE(cluster.ok());
  TrainingOptions options;
  options.batch_size = kBatch;
  options.seq_len = kSeqLen;
  options.unavailable_timeout = absl::Seconds(1);
  auto zeros = BuiltinGptModel::Create(*config, std::nullopt, "tiny");
  ASSERT_TRUE(zeros.ok());
  EXPECT_FALSE((*zeros)->has_initial_values());
  auto worker = TrainingWorker::Create(cluster->get(), *std::move(zeros), data->get(), options);
  EXPECT_FALSE(worker.ok()) << "waited for another worker's weights, none came";
  EXPECT_FALSE((*cluster)->FetchLayout().ok()) << "the shard must still be empty";
  auto seeded = BuiltinGptModel::Create(*config, 1, "tiny");
  ASSERT_TRUE(seeded.ok());
  EXPECT_TRUE(TrainingWorker::Create(cluster->get(), *std::move(seeded), data->get(), options).ok());
}

TEST(JoinTimelineTest, PhasesAddUpFromTheProcessStart) {
  const absl::Time start = ProcessStartTime();
  EXPECT_LE(start, absl::Now());
  EXPECT_GT(start, absl::Now() - absl::Hours(1));
  JoinTimeline timeline(absl::Now() - absl::Seconds(2));
  timeline.Mark("a");
  timeline.Add("b", absl::Milliseconds(250));
  EXPECT_EQ(timeline.Line().substr(0, 12), "join: a_s=2.");
  EXPECT_NE(timeline.Line().find(" b_s=0.250"), std::string::npos) << timeline.Line();
}

}  // namespace
}  // namespace spotps
