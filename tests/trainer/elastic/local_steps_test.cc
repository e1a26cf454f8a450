// Local mode (--consistency=local:H) end to end: trainers take H steps with
// their own AdamW and push the change of their weights once a round, which
// the shards average and apply with their outer optimizer (Nesterov SGD).
// Every unit is committed once, the shards see about units / H pushes, and
// the loss falls. A trainer told to stop mid-round pushes the steps it took
// and commits exactly those units; one killed mid-round gives its units
// back to be re-issued whole. Int8 pushes carry about a byte an element.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

constexpr int kLocalSteps = 4;

testing::JobOptions LocalJobOptions(int units, int local_steps) {
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = units;
  options.consistency = absl::StrCat("local:", local_steps);
  options.batch = 4;
  options.seq_len = 32;
  options.trainer_flags = {"--log_every=4"};
  options.default_optimizer = true;  // The outer optimizer local mode defaults to.
  return options;
}

// The training losses a trainer logged ("step N loss X"), in order.
std::vector<double> StepLosses(const std::string& log) {
  std::vector<double> losses;
  const std::regex re("\\] step [0-9]+ loss ([0-9.]+)");
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) {
    losses.push_back(std::stod((*it)[1]));
  }
  return losses;
}

uint64_t PushesApplied(testing::TrainingJob& job, int shard) {
  auto cluster = Cluster::Connect(job.shards().addresses());
  if (!cluster.ok()) return 0;
  auto stats = (*cluster)->Stats();
  return stats.ok() ? (*stats)[shard].pushes_applied() : 0;
}

// Runs `job` (its shards and 2 trainers) until the coordinator has it
// done, and checks that each of its `units` was committed once.
void RunToTheEnd(testing::TrainingJob& job, int units) {
  ASSERT_TRUE(job.StartShards(/*durable=*/false).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(job.StartTrainer().ok());
  auto done = job.WaitDone(absl::Seconds(240));
  ASSERT_TRUE(done.ok()) << done.status() << testing::LogTails(job.dir());
  EXPECT_EQ(done->epochs(0).committed(), static_cast<uint64_t>(units));
  EXPECT_EQ(done->epochs(0).duplicated(), 0u);
  EXPECT_EQ(done->epochs(0).reissued(), 0u) << testing::LogTails(job.dir());
}

// Which loss of a trainer ExpectLossFell compares with the start.
enum class EndLoss {
  kLastLogged,  // Its last logged training loss (a mean over --log_every steps).
  kValidation,  // Its validation loss on the weights it ended with (--eval_batches > 0):
                // one outlier step of a tiny batch cannot sway it.
};

// The logs of the job's 2 trainers; the end loss of each that logged more than one line lies
// more than 0.5 below where the job started. The start is the highest first loss any trainer
// logged: a trainer that joins late (a loaded machine can hold one back for most of the job)
// starts from weights the other already trained, so its own first line says little.
std::vector<std::string> ExpectLossFell(testing::TrainingJob& job,
                                        EndLoss end = EndLoss::kLastLogged) {
  std::vector<std::string> logs;
  std::vector<std::vector<double>> losses;
  double start = 0;
  for (int t = 0; t < 2; ++t) {
    logs.push_back(ReadFile(absl::StrCat(job.dir(), "/trainer", t, ".log")).value_or(""));
    losses.push_back(StepLosses(logs.back()));
    if (!losses.back().empty()) start = std::max(start, losses.back().front());
  }
  int trained_on = 0;  // Trainers that logged more than one line.
  for (int t = 0; t < 2; ++t) {
    if (losses[t].size() < 2) continue;
    ++trained_on;
    const double end_loss =
        end == EndLoss::kValidation ? testing::LogField(logs[t], "val_loss") : losses[t].back();
    EXPECT_GE(end_loss, 0.0) << logs[t];
    EXPECT_LT(end_loss, start - 0.5) << logs[t];
  }
  EXPECT_GE(trained_on, 1) << logs[0] << logs[1];
  return logs;
}

TEST(LocalStepsTest, TrainersPushOnceARoundCommitEveryUnitOnceAndTheLossFalls) {
  constexpr int kUnits = 96;
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::TrainingJob job(dir.path() + "/job", *tokens, LocalJobOptions(kUnits, kLocalSteps));
  RunToTheEnd(job, kUnits);
  if (HasFatalFailure()) return;
  // One push a round; a round ends early only when no unit is left to lease.
  const uint64_t pushes = PushesApplied(job, 1);
  EXPECT_GE(pushes, static_cast<uint64_t>(kUnits / kLocalSteps));
  EXPECT_LE(pushes, static_cast<uint64_t>(kUnits / kLocalSteps + 4))
      << testing::LogTails(job.dir());
  EXPECT_EQ(job.Shutdown(), 0) << testing::LogTails(job.dir());
  int64_t trained = 0;
  const std::vector<std::string> logs = ExpectLossFell(job);
  for (const std::string& log : logs) {
    EXPECT_NE(log.find(absl::StrCat("local steps ", kLocalSteps)), std::string::npos) << log;
    trained += static_cast<int64_t>(testing::LogField(log, "units"));
  }
  EXPECT_EQ(trained, kUnits);
  auto shard_log = ReadFile(job.dir() + "/shard1.log");
  ASSERT_TRUE(shard_log.ok());
  EXPECT_NE(shard_log->find("optimizer=sgd(momentum=0.9,nesterov) lr=0.7 "), std::string::npos)
      << *shard_log;
  std::cout << "local: " << kUnits << " units in " << pushes
            << " pushes per shard (H=" << kLocalSteps << ")" << std::endl;
}

// Payload bytes a shard received per element of a push: its bytes_in over
// its pushes and the elements it owns.
double BytesPerElement(testing::TrainingJob& job, int shard) {
  auto cluster = Cluster::Connect(job.shards().addresses());
  if (!cluster.ok()) return 0;
  auto stats = (*cluster)->Stats();
  if (!stats.ok() || (*stats)[shard].pushes_applied() == 0) return 0;
  uint64_t elements = 0;
  for (const auto& p : (*stats)[shard].partitions()) elements += p.num_elements();
  return static_cast<double>((*stats)[shard].bytes_in()) /
         static_cast<double>((*stats)[shard].pushes_applied() * elements);
}

// Int8 pushes (--push_dtype=int8) in local mode, where they matter most, in
// the shards' default mode and in sync rounds: about a byte per element
// instead of BF16's two, every unit committed once, and the validation loss
// of the weights the trainers end with lies well below the start. (A
// 4-step window of 4 x 32-token batches is too noisy for that: in the
// default mode one outlier step once put a window above the start while
// the trainer's next steps and its final weights were fine.)
TEST(LocalStepsTest, Int8PushesCarryAboutAByteAnElementAndTrain) {
  for (const std::string consistency : {"local:4", "async", "sync"}) {
    SCOPED_TRACE(consistency);
    constexpr int kUnits = 48;
    testing::TempDir dir;
    auto tokens = testing::MakeTokenFile(dir.path(), 8000);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    testing::JobOptions options = LocalJobOptions(kUnits, kLocalSteps);
    options.consistency = consistency;
    options.default_optimizer = absl::StartsWith(consistency, "local:");
    options.trainer_flags.push_back("--push_dtype=int8");
    options.trainer_flags.push_back("--eval_batches=8");
    testing::TrainingJob job(dir.path() + "/job", *tokens, options);
    RunToTheEnd(job, kUnits);
    if (HasFatalFailure()) return;
    const double per_element = BytesPerElement(job, 1);
    EXPECT_GE(per_element, 1.0);
    EXPECT_LE(per_element, 1.05) << "int8 blocks: a byte per element and 4 per 256";
    EXPECT_EQ(job.Shutdown(), 0) << testing::LogTails(job.dir());
    ExpectLossFell(job, EndLoss::kValidation);
    std::cout << consistency << " with int8 pushes: " << per_element
              << " payload bytes per element pushed" << std::endl;
  }
}

// Units trainer `name` committed so far, per the coordinator; -1 if unknown.
int64_t CommittedBy(testing::TrainingJob& job, const std::string& name) {
  auto p = job.Progress();
  if (!p.ok()) return -1;
  for (const auto& w : p->workers()) {
    if (w.name() == name) return static_cast<int64_t>(w.units_committed());
  }
  return -1;
}

// Waits until trainer `t` has committed `units` and logged a step past
// them: its next round is under way, with steps of it taken (a round of
// kRoundSteps takes far longer than the few steps between log lines).
bool WaitIntoARound(testing::TrainingJob& job, int t, int64_t units) {
  const std::string name = absl::StrCat("trainer-", t);
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  auto past = [&] {
    const std::vector<double> losses =
        StepLosses(ReadFile(absl::StrCat(job.dir(), "/trainer", t, ".log")).value_or(""));
    // --log_every=4: line k is step 4 (k + 1).
    return CommittedBy(job, name) >= units && 4 * static_cast<int64_t>(losses.size()) > units;
  };
  while (absl::Now() < give_up && !past()) absl::SleepFor(absl::Milliseconds(20));
  return past();
}

TEST(LocalStepsTest, AStoppedTrainerCommitsWhatItTrainedAndAKilledOneGivesItsRoundBack) {
  constexpr int kUnits = 480, kRoundSteps = 32;
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::TrainingJob job(dir.path() + "/job", *tokens, LocalJobOptions(kUnits, kRoundSteps));
  ASSERT_TRUE(job.StartShards(/*durable=*/false).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(job.StartTrainer().ok());
  // Each goes mid-round, after a round of its own.
  ASSERT_TRUE(WaitIntoARound(job, 0, kRoundSteps)) << testing::LogTails(job.dir());
  job.trainers()[0]->Signal(SIGTERM);
  auto drained = job.trainers()[0]->Wait(absl::Seconds(60));
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(*drained, 0) << testing::LogTails(job.dir());
  ASSERT_TRUE(WaitIntoARound(job, 1, kRoundSteps)) << testing::LogTails(job.dir());
  job.trainers()[1]->Signal(SIGKILL);
  auto done = job.WaitDone(absl::Seconds(240));
  ASSERT_TRUE(done.ok()) << done.status() << testing::LogTails(job.dir());
  EXPECT_EQ(done->epochs(0).committed(), static_cast<uint64_t>(kUnits));
  EXPECT_EQ(done->epochs(0).duplicated(), 0u) << testing::LogTails(job.dir());
  EXPECT_GE(done->epochs(0).reissued(), 1u) << "the killed trainer's round was not re-issued";
  EXPECT_EQ(job.Shutdown(), 0) << testing::LogTails(job.dir());
  auto stopped_log = ReadFile(job.dir() + "/trainer0.log");
  ASSERT_TRUE(stopped_log.ok());
  // The stopped trainer's last round was cut short and still committed.
  const auto stopped = static_cast<int64_t>(testing::LogField(*stopped_log, "units"));
  EXPECT_GT(stopped, kRoundSteps) << *stopped_log;
  EXPECT_NE(stopped % kRoundSteps, 0) << "stopped between rounds, not in one: " << *stopped_log;
  auto killed_log = ReadFile(job.dir() + "/trainer1.log");
  ASSERT_TRUE(killed_log.ok());
  EXPECT_EQ(testing::LogField(*killed_log, "units"), -1) << "the killed trainer wrote a summary";
  std::cout << "local: the stopped trainer committed " << stopped << " units (rounds of "
            << kRoundSteps << "), " << done->epochs(0).reissued() << " re-issued after the kill"
            << std::endl;
}

}  // namespace
}  // namespace spotps
