// Sync mode end to end: 2 shard processes and trainer processes while one
// trainer is killed -9, another drains on SIGTERM, a newcomer joins, and
// shard 1, then shard 0 (the coordinator) crash and restart from their
// checkpoints. Rounds keep closing (no membership change deadlocks them),
// every unit of every epoch is trained exactly once in the final count, and
// the model learns.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>

#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

using testing::LogTails;
using testing::TrainingJob;

constexpr int kEpochs = 2, kUnits = 200, kTrainers = 3;

// Waits until at least `n` sync rounds were applied.
absl::Status WaitForRounds(TrainingJob& job, uint64_t n, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    auto p = job.Progress();
    if (p.ok() && p->sync_rounds_applied() >= n) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("fewer than ", n, " rounds applied"));
}

uint64_t RoundsApplied(TrainingJob& job) {
  auto p = job.Progress();
  return p.ok() ? p->sync_rounds_applied() : 0;
}

// Runs a checkpoint round, then kill -9s shard `i` and starts it again a
// second later on its port (it restores that checkpoint). The round is
// asked for rather than waited for: a fast machine would otherwise train
// much of the job while waiting for the next periodic round.
absl::Status CrashAndRestart(TrainingJob& job, Cluster& cluster, int i) {
  auto at_start = cluster.Stats();
  if (!at_start.ok()) return at_start.status();
  const uint64_t had = (*at_start)[i].last_checkpoint_id();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  bool written = false;
  while (!written && absl::Now() < give_up) {
    // A round may fail while a restarted shard is rolled back; ask again.
    if (!job.CheckpointNow().ok()) absl::SleepFor(absl::Milliseconds(100));
    auto stats = cluster.Stats();
    written = stats.ok() && (*stats)[i].last_checkpoint_id() > had;
  }
  if (!written) return absl::DeadlineExceededError("no checkpoint round succeeded");
  auto progress = job.Progress();
  if (progress.ok() && progress->done()) {
    return absl::FailedPreconditionError("the job ended before the shard could crash");
  }
  job.shards().shard(i).Signal(SIGKILL);
  if (auto code = job.shards().shard(i).Wait(absl::Seconds(10)); !code.ok()) {
    return code.status();
  }
  absl::SleepFor(absl::Seconds(1));
  return job.shards().Restart(i);
}

TEST(SyncTrainingTest, RoundsGoOnThroughPreemptionsAJoinAndCrashesOfBothShards) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::JobOptions options;
  options.epochs = kEpochs;
  options.units_per_epoch = kUnits;
  options.consistency = "sync";
  TrainingJob job(dir.path() + "/job", *tokens, options);
  const std::string& logs = job.dir();
  ASSERT_TRUE(job.StartShards(/*durable=*/true).ok());
  for (int i = 0; i < kTrainers; ++i) ASSERT_TRUE(job.StartTrainer().ok());
  ASSERT_TRUE(WaitForRounds(job, 4, absl::Seconds(60)).ok()) << LogTails(logs);

  // kill -9: the round waits for the dead trainer only until its lease ends.
  job.trainers()[0]->Signal(SIGKILL);
  ASSERT_TRUE(job.trainers()[0]->Wait(absl::Seconds(10)).ok());
  ASSERT_TRUE(WaitForRounds(job, RoundsApplied(job) + 3, absl::Seconds(30)).ok())
      << "rounds stopped after a trainer died" << LogTails(logs);

  // A newcomer joins the open round; another trainer drains.
  ASSERT_TRUE(job.StartTrainer().ok());
  ASSERT_TRUE(WaitForRounds(job, RoundsApplied(job) + 3, absl::Seconds(30)).ok()) << LogTails(logs);
  job.trainers()[1]->Signal(SIGTERM);
  auto drained = job.trainers()[1]->Wait(absl::Seconds(30));
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(*drained, 0) << LogTails(logs);
  ASSERT_TRUE(WaitForRounds(job, RoundsApplied(job) + 3, absl::Seconds(30)).ok()) << LogTails(logs);

  // Shard 1 dies once it has a checkpoint and comes back from it: rounds it
  // cannot apply are given up and their units trained again.
  auto cluster = Cluster::Connect(job.shards().addresses());
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE(CrashAndRestart(job, **cluster, 1).ok()) << LogTails(logs);
  ASSERT_TRUE(WaitForRounds(job, RoundsApplied(job) + 3, absl::Seconds(60)).ok())
      << "rounds stopped after shard 1 restarted" << LogTails(logs);
  auto before = job.Progress();
  ASSERT_TRUE(before.ok());
  ASSERT_FALSE(before->done()) << "the job ended before the coordinator could crash";
  EXPECT_GE(before->workers_expired(), 1u);
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto after = job.Progress();
  ASSERT_TRUE(after.ok());
  // Shard 0 applied every round applied everywhere, each once as one
  // update, and maybe some that were given up because of shard 1. Rounds
  // go on between the reads, and shard 0 applies a round before the
  // coordinator counts it: one round may be applied but not yet counted.
  EXPECT_GE((*stats)[0].global_step(), before->sync_rounds_applied());
  EXPECT_LE((*stats)[0].global_step(),
            after->sync_rounds_applied() + after->sync_rounds_abandoned() + 1);
  for (const auto& s : *stats) {
    EXPECT_TRUE(s.sync());
    // Nobody pushes a gradient of an older round while the coordinator
    // lives, except a retry into a round given up because shard 1 lost its
    // gradients (refused, and trained again); after the coordinator
    // restarts, trainers may too.
    EXPECT_LE(s.pushes_too_stale(), kTrainers * after->sync_rounds_abandoned()) << LogTails(logs);
  }

  // Shard 0, the coordinator, too: trainers register again and go on.
  ASSERT_TRUE(CrashAndRestart(job, **cluster, 0).ok()) << LogTails(logs);
  auto done = job.WaitDone(absl::Seconds(150));
  ASSERT_TRUE(done.ok()) << done.status() << LogTails(logs);
  EXPECT_EQ(done->consistency(), v1::CONSISTENCY_SYNC);
  for (const auto& e : done->epochs()) {
    EXPECT_EQ(e.committed(), static_cast<uint64_t>(kUnits)) << "epoch " << e.epoch();
    EXPECT_EQ(e.duplicated(), 0u) << "epoch " << e.epoch();
  }
  EXPECT_GT(done->sync_rounds_applied(), 0u);
  stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT((*stats)[0].restored_checkpoint_id(), 0u);
  auto val = job.ValLoss();
  ASSERT_TRUE(val.ok()) << val.status();
  EXPECT_LT(*val, 0.75 * std::log(256.0)) << "the model did not learn";
  EXPECT_EQ(job.Shutdown(), 0) << LogTails(logs);
  EXPECT_EQ(testing::ProcessesMentioning(dir.path()), 0) << "a process was left behind";
}

// Sync shards hold every push for a round that only the coordinator
// closes: a trainer that takes no units from it must stop with a clear
// error instead of training into the void.
TEST(SyncTrainingTest, ATrainerWithoutTheCoordinatorIsRefused) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 500);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto shards = testing::LocalShardCluster::Start(
      1, {"--consistency=sync", "--epochs=1", "--units_per_epoch=10"}, dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  const std::string log = dir.path() + "/trainer.log";
  auto trainer = testing::ChildProcess::Start(
      {testing::BinaryPath("spotps-trainer"), "--ps=" + (*shards)->addresses(), "--model=tiny",
       "--data=" + *tokens, "--batch=2", "--seq_len=16", "--threads=1", "--steps=5",
       "--coordinator=none", "--eval_batches=0"},
      log);
  ASSERT_TRUE(trainer.ok());
  auto code = (*trainer)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok());
  const std::string text = *ReadFile(log);
  EXPECT_EQ(*code, 1) << text;
  EXPECT_NE(text.find("--coordinator=auto"), std::string::npos) << text;
}

}  // namespace
}  // namespace spotps
