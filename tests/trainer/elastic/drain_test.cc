// Preemption: a trainer told to stop (SIGTERM, or a spot notice from a fake
// instance-metadata server) drains within its deadline, loses nothing and
// leaves no lease behind.
#include <gtest/gtest.h>

#include <functional>
#include <signal.h>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_metadata_server.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LogField;

class DrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokens = testing::MakeTokenFile(dir_.path(), 5000);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = *tokens;
    auto shards = testing::LocalShardCluster::Start(
        1, {"--optimizer=adamw", "--lr=1e-3", "--epochs=1", "--units_per_epoch=100000"},
        dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    coordinator_ = *CoordinatorClient::Connect(shards_->addresses());
  }

  std::unique_ptr<ChildProcess> StartTrainer(std::vector<std::string> extra) {
    std::vector<std::string> argv = {BinaryPath("spotps-trainer"),
                                     "--ps=" + shards_->addresses(),
                                     "--model=tiny",
                                     "--data=" + tokens_,
                                     "--batch=4",
                                     "--seq_len=32",
                                     "--threads=1",
                                     "--log_every=5",
                                     "--eval_batches=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto t = ChildProcess::Start(argv, dir_.path() + "/trainer.log");
    EXPECT_TRUE(t.ok());
    return *std::move(t);
  }

  void WaitForCommits(uint64_t n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      auto p = coordinator_->Progress();
      if (p.ok() && p->epochs(0).committed() >= n) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "no progress";
  }

  // After a clean drain: the worker is gone, holds nothing, and every unit
  // it committed has its gradient applied.
  void ExpectCleanExit(const std::string& log) {
    auto p = coordinator_->Progress();
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->workers_size(), 0) << log;
    EXPECT_EQ(p->workers_expired(), 0u) << "it deregistered, not timed out";
    EXPECT_EQ(p->epochs(0).leased(), 0u);
    EXPECT_EQ(p->epochs(0).committed(), static_cast<uint64_t>(LogField(log, "units"))) << log;
    auto stats = (*Cluster::Connect(shards_->addresses()))->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ((*stats)[0].pushes_applied(), static_cast<uint64_t>(LogField(log, "steps"))) << log;
    // It left: the shard no longer counts it as a live worker (it would for
    // at least a second of silence otherwise).
    EXPECT_EQ((*stats)[0].live_pushers(), 0u) << log;
  }

  // A trainer watching `source` drains once `announce` makes the fake
  // metadata service say so, and logs `reason`.
  void ExpectNoticeDrains(
      const std::string& source,
      const std::function<void(testing::FakeMetadataServer&)>& announce,
      const std::string& reason) {
    auto metadata = testing::FakeMetadataServer::Start();
    ASSERT_TRUE(metadata.ok()) << metadata.status();
    auto trainer = StartTrainer({"--spot_notice=" + source, "--metadata_url=" + (*metadata)->url(),
                                 "--spot_poll_s=0.1"});
    WaitForCommits(5);
    EXPECT_TRUE(trainer->running());  // "No notice" answers keep it training.
    announce(**metadata);
    auto code = trainer->Wait(absl::Seconds(30));
    ASSERT_TRUE(code.ok());
    const std::string log = *ReadFile(dir_.path() + "/trainer.log");
    ASSERT_EQ(*code, 0) << log;
    EXPECT_NE(log.find(reason), std::string::npos) << log;
    ExpectCleanExit(log);
  }

  testing::TempDir dir_;
  std::string tokens_;
  std::unique_ptr<testing::LocalShardCluster> shards_;
  std::unique_ptr<CoordinatorClient> coordinator_;
};

TEST_F(DrainTest, SigtermFinishesTheStepPushesAndDeregisters) {
  auto trainer = StartTrainer({"--drain_deadline_s=20"});
  WaitForCommits(5);
  const absl::Time sent = absl::Now();
  trainer->Signal(SIGTERM);
  auto code = trainer->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok());
  const absl::Duration took = absl::Now() - sent;
  const std::string log = *ReadFile(dir_.path() + "/trainer.log");
  ASSERT_EQ(*code, 0) << log;
  EXPECT_LT(took, absl::Seconds(20));
  EXPECT_GE(LogField(log, "drain_ms"), 0) << log;
  EXPECT_GT(LogField(log, "first_push_s"), 0) << log;
  ExpectCleanExit(log);
}

TEST_F(DrainTest, SpotNoticeDrainsTheTrainer) {
  ExpectNoticeDrains(
      "aws",
      [](testing::FakeMetadataServer& m) { m.ScheduleNotice("terminate", "2026-12-02T15:00:00Z"); },
      "spot notice from aws (terminate at 2026-12-02T15:00:00Z)");
}

TEST_F(DrainTest, GceNoticeDrainsTheTrainer) {
  ExpectNoticeDrains(
      "gce", [](testing::FakeMetadataServer& m) { m.SetGcePreempted("TRUE"); },
      "spot notice from gce (preempted)");
}

TEST_F(DrainTest, AzureNoticeDrainsTheTrainer) {
  ExpectNoticeDrains(
      "azure",
      [](testing::FakeMetadataServer& m) {
        m.SetAzureEvents(R"({"Events": [{"EventType": "Preempt", "Resources": ["spotps-test-vm"],
                                         "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"}]})");
      },
      "spot notice from azure (Preempt at Mon, 19 Sep 2016 18:29:47 GMT)");
}

TEST_F(DrainTest, AStepLongerThanTheDeadlineIsDroppedAndItsUnitReissued) {
  // The small model's step takes seconds here; the deadline is 50 ms.
  auto trainer =
      StartTrainer({"--model=small", "--batch=8", "--seq_len=128", "--drain_deadline_s=0.05"});
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  while (absl::Now() < give_up) {  // Wait until it holds a unit.
    auto p = coordinator_->Progress();
    if (p.ok() && p->epochs(0).leased() > 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  trainer->Signal(SIGTERM);
  auto code = trainer->Wait(absl::Seconds(20));
  ASSERT_TRUE(code.ok());
  const std::string log = *ReadFile(dir_.path() + "/trainer.log");
  ASSERT_EQ(*code, 0) << log;
  EXPECT_NE(log.find("dropping the step"), std::string::npos) << log;
  auto p = coordinator_->Progress();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->workers_size(), 0);
  EXPECT_EQ(p->epochs(0).leased(), 0u);
  EXPECT_GE(p->epochs(0).reissued(), 1u);
}

}  // namespace
}  // namespace spotps
