// Trainer processes taking work units from the coordinator that shard 0
// hosts: every unit of every epoch is trained exactly once.
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LogField;

constexpr int kEpochs = 2, kUnits = 30;

class CoordinatedTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokens = testing::MakeTokenFile(dir_.path(), 5000);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = *tokens;
    auto shards = testing::LocalShardCluster::Start(
        2,
        {"--optimizer=adamw", "--lr=2e-3", absl::StrCat("--epochs=", kEpochs),
         absl::StrCat("--units_per_epoch=", kUnits), "--worker_lease_s=2", "--unit_lease_s=5"},
        dir_.path());
    // Only shard 0 may host the coordinator: shard 1 must refuse --epochs.
    ASSERT_FALSE(shards.ok());
    EXPECT_NE(shards.status().message().find("shard 1 exited"), absl::string_view::npos);
  }

  std::unique_ptr<ChildProcess> StartTrainer(const std::string& ps, int index) {
    auto t = ChildProcess::Start(
        {BinaryPath("spotps-trainer"), "--ps=" + ps, "--model=tiny", "--data=" + tokens_,
         "--batch=4", "--seq_len=32", "--threads=1", absl::StrCat("--worker_index=", index),
         "--log_every=10", "--eval_batches=0"},
        absl::StrCat(dir_.path(), "/trainer", index, ".log"));
    EXPECT_TRUE(t.ok()) << t.status();
    return *std::move(t);
  }

  void RunToCompletion(const std::string& consistency);

  testing::TempDir dir_;
  std::string tokens_;
  std::unique_ptr<testing::LocalShardCluster> shards_;
  std::unique_ptr<CoordinatorClient> coordinator_;
};

// Runs 2 trainers to the end of the job on one shard that coordinates with
// `consistency`, and checks every unit was trained exactly once.
void CoordinatedTrainingTest::RunToCompletion(const std::string& consistency) {
  auto shards = testing::LocalShardCluster::Start(
      1,
      {"--optimizer=adamw", "--lr=2e-3", absl::StrCat("--epochs=", kEpochs),
       absl::StrCat("--units_per_epoch=", kUnits), "--worker_lease_s=2", "--unit_lease_s=5",
       "--consistency=" + consistency},
      dir_.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::vector<std::unique_ptr<ChildProcess>> trainers;
  for (int i = 0; i < 2; ++i) trainers.push_back(StartTrainer((*shards)->addresses(), i));
  int64_t units = 0;
  for (int i = 0; i < 2; ++i) {
    auto code = trainers[i]->Wait(absl::Seconds(180));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string log = *ReadFile(absl::StrCat(dir_.path(), "/trainer", i, ".log"));
    ASSERT_EQ(*code, 0) << log;
    EXPECT_EQ(LogField(log, "job_done"), 1) << log;
    units += static_cast<int64_t>(LogField(log, "units"));
  }
  EXPECT_EQ(units, kEpochs * kUnits);
  coordinator_ = *CoordinatorClient::Connect((*shards)->addresses());
  auto progress = coordinator_->Progress();
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_TRUE(progress->done());
  for (const auto& e : progress->epochs()) {
    EXPECT_EQ(e.committed(), static_cast<uint64_t>(kUnits));
    EXPECT_EQ(e.duplicated(), 0u);
  }
  EXPECT_EQ(progress->workers_size(), 0);  // Both deregistered on exit.
  auto cluster = Cluster::Connect((*shards)->addresses());
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok());
  // Where pushes are applied on arrival (ssp, whose default method is
  // none) each trainer's join ramp (--first_step_batch, on by default)
  // trains its first unit in two pushes; sync and async's default "fresh"
  // have no ramp.
  const int ramp_pushes = consistency == "sync" || consistency == "async" ? 0 : 2;
  EXPECT_EQ((*stats)[0].pushes_applied(), static_cast<uint64_t>(kEpochs * kUnits + ramp_pushes));
  shards_ = *std::move(shards);
}

TEST_F(CoordinatedTrainingTest, EveryUnitOfEveryEpochIsTrainedExactlyOnce) {
  RunToCompletion("async");
  auto& coordinator = coordinator_;
  // Hostile requests change nothing.
  EXPECT_EQ(coordinator->Heartbeat(987654).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator->Acquire(987654).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator->Commit(1, 0, kUnits).status().code(), absl::StatusCode::kNotFound);
  const uint64_t probe = coordinator->Register("probe")->worker_id();
  EXPECT_EQ(coordinator->Commit(probe, 0, kUnits).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator->Register(std::string(1000, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatedTrainingTest, StaleSynchronousParallelAlsoTrainsEveryUnitOnce) {
  RunToCompletion("ssp:1");
}

TEST_F(CoordinatedTrainingTest, SyncRoundsAlsoTrainEveryUnitOnce) {
  RunToCompletion("sync");
  auto progress = coordinator_->Progress();
  ASSERT_TRUE(progress.ok());
  // Two trainers: rounds of at most 2 units, and every round was applied.
  EXPECT_GE(progress->sync_rounds_applied(), static_cast<uint64_t>(kEpochs * kUnits / 2));
  EXPECT_EQ(progress->sync_rounds_abandoned(), 0u);
}

TEST_F(CoordinatedTrainingTest, AKilledTrainersUnitsAreReissuedAndNothingIsLost) {
  auto shards = testing::LocalShardCluster::Start(
      1,
      {"--optimizer=adamw", "--lr=2e-3", absl::StrCat("--epochs=", kEpochs),
       absl::StrCat("--units_per_epoch=", kUnits), "--worker_lease_s=2", "--unit_lease_s=5"},
      dir_.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto coordinator = CoordinatorClient::Connect((*shards)->addresses());
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  // Let a victim take and train a few units, then kill -9 it. It may die
  // between a commit and its next acquire, holding nothing; only a death
  // that leaves a lease behind tests the reissue, so try again until one does.
  int kills = 0;
  for (uint64_t target = 3; kills < 5; target += 3) {
    auto victim = StartTrainer((*shards)->addresses(), 0);
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      auto p = (*coordinator)->Progress();
      if (p.ok() && p->epochs(0).committed() >= target && p->epochs(0).leased() > 0) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    victim->Signal(SIGKILL);
    ASSERT_TRUE(victim->Wait(absl::Seconds(10)).ok());
    ++kills;
    auto after = (*coordinator)->Progress();
    ASSERT_TRUE(after.ok()) << after.status();
    if (after->epochs(0).leased() > 0) break;  // The dead victim's unit.
  }
  auto survivor = StartTrainer((*shards)->addresses(), 1);
  auto code = survivor->Wait(absl::Seconds(180));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string log = *ReadFile(dir_.path() + "/trainer1.log");
  ASSERT_EQ(*code, 0) << log;
  auto progress = (*coordinator)->Progress();
  ASSERT_TRUE(progress.ok());
  EXPECT_TRUE(progress->done());
  uint64_t reissued = 0;
  for (const auto& e : progress->epochs()) {
    EXPECT_EQ(e.committed(), static_cast<uint64_t>(kUnits));  // None lost.
    reissued += e.reissued();
  }
  EXPECT_GT(reissued, 0u);  // A victim held a unit when it died.
  EXPECT_EQ(progress->workers_expired(), static_cast<uint64_t>(kills));
}

// A trainer killed mid-job closes its presence stream with its process:
// the coordinator drops it after --presence_grace_s (2 s) and re-issues its
// unit, long before its 30 s worker lease would have.
TEST_F(CoordinatedTrainingTest, AKilledTrainerIsDroppedAfterThePresenceGraceNotItsLease) {
  auto shards = testing::LocalShardCluster::Start(
      1,
      {"--optimizer=adamw", "--lr=2e-3", "--epochs=1", "--units_per_epoch=100000",
       "--worker_lease_s=30", "--unit_lease_s=120"},
      dir_.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto coordinator = CoordinatorClient::Connect((*shards)->addresses());
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  auto victim = StartTrainer((*shards)->addresses(), 0);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  bool training = false;
  while (!training && absl::Now() < give_up) {
    auto p = (*coordinator)->Progress();
    training = p.ok() && p->epochs(0).committed() >= 3;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(training) << *ReadFile(dir_.path() + "/trainer0.log");
  victim->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(victim->Wait(absl::Seconds(10)).ok());
  absl::StatusOr<v1::ProgressResponse> p = absl::UnknownError("not asked yet");
  while (absl::Now() - killed < absl::Seconds(20)) {
    p = (*coordinator)->Progress();
    if (p.ok() && p->workers_expired() == 1) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(p.ok()) << p.status();
  const absl::Duration dropped_after = absl::Now() - killed;
  EXPECT_EQ(p->workers_expired(), 1u);
  EXPECT_EQ(p->workers_size(), 0);
  EXPECT_LT(dropped_after, absl::Seconds(20)) << "the 30 s lease, not the 2 s grace, dropped it";
  std::cout << "presence: killed trainer dropped after " << absl::FormatDuration(dropped_after)
            << ", units re-issued " << p->epochs(0).reissued() << std::endl;
}

}  // namespace
}  // namespace spotps
