// What a new user meets first: trainers that start before their shards (as
// on Kubernetes, an Auto Scaling group or Slurm) wait for them and train;
// a cluster that never comes is a runtime error (exit 1) after
// --ps_timeout_s; and every mistake in the local inputs is reported at
// once, exit 2, before any connection is made.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/counting_listener.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LogField;

class StartOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokens = testing::MakeTokenFile(dir_.path(), 3000);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = *tokens;
  }

  // Runs spotps-trainer with `args` to its end; returns its exit code.
  int RunTrainer(const std::vector<std::string>& args, std::string* output) {
    std::vector<std::string> argv = {BinaryPath("spotps-trainer")};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = absl::StrCat(dir_.path(), "/run", runs_++, ".log");
    auto child = ChildProcess::Start(argv, log);
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return -1;
    absl::StatusOr<int> code = (*child)->Wait(absl::Seconds(120));
    *output = ReadFile(log).value_or("");
    return code.ok() ? *code : -1;
  }

  testing::TempDir dir_;
  std::string tokens_;
  int runs_ = 0;
};

TEST_F(StartOrderTest, TrainersStartedBeforeTheirShardsWaitAndTrain) {
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = 40;
  options.trainer_flags = {"--ps_timeout_s=90"};
  testing::TrainingJob job(dir_.path() + "/job", tokens_, options);
  ASSERT_TRUE(job.ReserveShards(/*durable=*/false).ok());
  ASSERT_TRUE(job.StartTrainer().ok());
  ASSERT_TRUE(job.StartTrainer().ok());
  // Longer than a trainer's start-up plus its old, ~2 s give-up.
  absl::SleepFor(absl::Seconds(20));
  ASSERT_EQ(job.Running().size(), 2u) << testing::LogTails(job.dir());
  for (int i = 0; i < 2; ++i) {
    const std::string log = *ReadFile(absl::StrCat(job.dir(), "/trainer", i, ".log"));
    EXPECT_TRUE(absl::StrContains(log, "waiting for the coordinator at 127.0.0.1:")) << log;
  }
  ASSERT_TRUE(job.StartShards(/*durable=*/false).ok()) << testing::LogTails(job.dir());
  absl::StatusOr<v1::ProgressResponse> done = job.WaitDone(absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status() << testing::LogTails(job.dir());
  ASSERT_EQ(done->epochs_size(), 1);
  EXPECT_EQ(done->epochs(0).committed(), 40u);
  int64_t units = 0;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<int> code = job.trainers()[i]->Wait(absl::Seconds(60));
    const std::string log = *ReadFile(absl::StrCat(job.dir(), "/trainer", i, ".log"));
    ASSERT_TRUE(code.ok() && *code == 0) << log;
    units += static_cast<int64_t>(LogField(log, "units"));
  }
  EXPECT_EQ(units, 40);
  EXPECT_EQ(job.Shutdown(), 0);
}

TEST_F(StartOrderTest, AClusterThatNeverComesIsARuntimeErrorAfterTheTimeout) {
  absl::StatusOr<std::vector<int>> port = testing::PickFreePorts(1);
  ASSERT_TRUE(port.ok());
  const absl::Time start = absl::Now();
  std::string output;
  const int code = RunTrainer({absl::StrCat("--ps=127.0.0.1:", (*port)[0]), "--data=" + tokens_,
                               "--ps_timeout_s=4", "--threads=1"},
                              &output);
  EXPECT_EQ(code, 1) << output;
  EXPECT_GE(absl::Now() - start, absl::Seconds(4)) << output;
  EXPECT_TRUE(absl::StrContains(output, "waiting for the coordinator")) << output;
  EXPECT_TRUE(absl::StrContains(output, "gave up after")) << output;
  EXPECT_TRUE(absl::StrContains(output, "nothing listens there")) << output;
}

TEST_F(StartOrderTest, EveryLocalMistakeIsReportedAtOnceBeforeAnyConnection) {
  testing::CountingListener shard;
  std::string output;
  const int code = RunTrainer(
      {absl::StrCat("--ps=127.0.0.1:", shard.port()), "--model=nonexistent",
       "--data=" + dir_.path() + "/missing.tokens", "--batch=0", "--transfer_nice=40", "--nice=-1",
       "--init_from=" + dir_.path() + "/missing.safetensors", "--threads=1"},
      &output);
  EXPECT_EQ(code, 2) << output;
  for (const char* problem : {"unknown model preset 'nonexistent'", "--batch=0 must be positive",
                              "--transfer_nice must be in [0, 19]", "--nice must be in [0, 19]",
                              "--data: open ", "missing.tokens"}) {
    EXPECT_TRUE(absl::StrContains(output, problem)) << problem << "\n" << output;
  }
  EXPECT_EQ(shard.Accepted(), 0) << output;

  // With a valid model the data and the weights file are checked too.
  const int second = RunTrainer(
      {absl::StrCat("--ps=127.0.0.1:", shard.port()), "--model=tiny",
       "--data=" + dir_.path() + "/missing.tokens",
       "--init_from=" + dir_.path() + "/missing.safetensors", "--threads=1"},
      &output);
  EXPECT_EQ(second, 2) << output;
  EXPECT_TRUE(absl::StrContains(output, "2 problems")) << output;
  EXPECT_TRUE(absl::StrContains(output, "--init_from: ")) << output;
  EXPECT_EQ(shard.Accepted(), 0) << output;

  // A data file whose ids the model's vocabulary cannot hold.
  const int third = RunTrainer({absl::StrCat("--ps=127.0.0.1:", shard.port()), "--model=tiny",
                                "--vocab_size=100", "--data=" + tokens_, "--threads=1"},
                               &output);
  EXPECT_EQ(third, 2) << output;
  EXPECT_TRUE(absl::StrContains(output, "the model's vocabulary has 100 entries")) << output;
  EXPECT_EQ(shard.Accepted(), 0) << output;
}

}  // namespace
}  // namespace spotps
