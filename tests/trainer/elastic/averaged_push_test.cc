// Shard-side averaging (--staleness_method=avg) end to end: one shard
// process averaging pairs of pushes from 2 real trainer processes. Every
// push is applied exactly once (the shard's applied count equals the pushes
// the trainers made, none held at the end), updates are fewer than pushes,
// and the trainers' start lines name the method the shard reports in Stats.
// Then the default, "fresh", on two shards: the trainers compute on weights
// that hold every earlier update (staleness ~0, where overlapped async
// trainers run at >= 1), and shard 1, which has no coordinator, averages
// too (it counts the clients that push to it). Last, what an update waits
// for under churn: a trainer killed without notice stops counting after a
// few of its push intervals, long before its worker lease ends, a
// registered worker that has not pushed yet is not waited for, and a
// trainer with no unit to take is not waited for while it has none.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LogField;

constexpr int kTrainers = 2, kUnits = 30;
// Enough that the start (the second trainer still loading, shard 1 not yet
// counting both clients) is a small share of the pushes.
constexpr int kFreshUnits = 150;

// Runs kTrainers trainer processes against `addresses` to the end of the
// job; their logs, or the log of one that failed.
absl::StatusOr<std::vector<std::string>> RunTrainers(const std::string& addresses,
                                                     const std::string& tokens,
                                                     const std::string& dir) {
  std::vector<std::unique_ptr<ChildProcess>> trainers;
  for (int i = 0; i < kTrainers; ++i) {
    auto t = ChildProcess::Start(
        {BinaryPath("spotps-trainer"), "--ps=" + addresses, "--model=tiny", "--data=" + tokens,
         "--batch=4", "--seq_len=32", "--threads=1", absl::StrCat("--worker_index=", i),
         "--log_every=0", "--eval_batches=0"},
        absl::StrCat(dir, "/trainer", i, ".log"));
    if (!t.ok()) return t.status();
    trainers.push_back(*std::move(t));
  }
  std::vector<std::string> logs;
  for (int i = 0; i < kTrainers; ++i) {
    auto code = trainers[i]->Wait(absl::Seconds(240));
    logs.push_back(ReadFile(absl::StrCat(dir, "/trainer", i, ".log")).value_or(""));
    if (!code.ok() || *code != 0) {
      return absl::InternalError(absl::StrCat("trainer ", i, " failed:\n", logs.back()));
    }
  }
  return logs;
}

TEST(AveragedPushTest, TwoTrainersPushesAreAppliedOnceEachInAveragedUpdates) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto shards = testing::LocalShardCluster::Start(
      1,
      {"--optimizer=adamw", "--lr=1e-3", "--epochs=1", absl::StrCat("--units_per_epoch=", kUnits),
       "--worker_lease_s=10", "--staleness_method=avg", "--average_pushes=2",
       "--average_wait_ms=200"},
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  absl::StatusOr<std::vector<std::string>> logs =
      RunTrainers((*shards)->addresses(), *tokens, dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status();
  double pushes = 0;
  for (const std::string& log : *logs) {
    EXPECT_NE(log.find("staleness_method=none+avg(k=2,wait=200ms)"), std::string::npos) << log;
    ASSERT_EQ(LogField(log, "dropped"), 0) << log;
    pushes += LogField(log, "steps");
  }
  // One epoch, each unit pushed once, but each trainer's first unit in two
  // pushes (the join ramp, --first_step_batch).
  EXPECT_EQ(pushes, kUnits + kTrainers);
  // A held odd push is applied after --average_wait_ms even with no other.
  auto cluster = Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(cluster.ok());
  auto stats = (*cluster)->Stats();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up &&
         !(stats.ok() && (*stats)[0].pushes_applied() == static_cast<uint64_t>(pushes))) {
    absl::SleepFor(absl::Milliseconds(50));
    stats = (*cluster)->Stats();
  }
  ASSERT_TRUE(stats.ok()) << stats.status();
  const v1::StatsResponse& s = (*stats)[0];
  EXPECT_EQ(s.staleness_method(), "none+avg(k=2,wait=200ms)");
  EXPECT_EQ(s.pushes_applied(), static_cast<uint64_t>(pushes));
  EXPECT_EQ(s.pushes_duplicate(), 0u);
  // Updates: at least half the pushes (pairs), fewer than the pushes.
  EXPECT_GE(s.global_step() * 2, s.pushes_applied());
  EXPECT_LT(s.global_step(), s.pushes_applied());
  for (const v1::PartitionStats& p : s.partitions()) EXPECT_EQ(p.version(), s.global_step());
}

TEST(AveragedPushTest, DefaultFreshTrainersComputeOnWeightsHoldingEveryUpdate) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto shards = testing::LocalShardCluster::Start(
      2,
      [](int index, const std::string&) {
        std::vector<std::string> flags = {"--optimizer=adamw", "--lr=1e-3"};
        if (index > 0) return flags;  // The coordinator lives on shard 0 only.
        flags.insert(flags.end(), {"--epochs=1", absl::StrCat("--units_per_epoch=", kFreshUnits),
                                   "--worker_lease_s=10"});
        return flags;
      },
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  absl::StatusOr<std::vector<std::string>> logs =
      RunTrainers((*shards)->addresses(), *tokens, dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status();
  double pushes = 0;
  for (const std::string& log : *logs) {
    EXPECT_NE(log.find("staleness_method=none+avg(k=live,wait=1000ms)+fresh"), std::string::npos)
        << log;
    ASSERT_EQ(LogField(log, "dropped"), 0) << log;
    // Only a push that an update left out (a trainer starting late, or
    // one slower than the wait) is stale at all.
    EXPECT_LT(LogField(log, "staleness"), 0.5) << log;
    pushes += LogField(log, "steps");
  }
  EXPECT_EQ(pushes, kFreshUnits);  // No join ramp where pushes wait for each other.
  auto cluster = Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(cluster.ok());
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const v1::StatsResponse& s : *stats) {
    EXPECT_TRUE(s.compute_on_fresh_weights()) << s.shard_index();
    EXPECT_EQ(s.pushes_applied(), static_cast<uint64_t>(pushes)) << s.shard_index();
    EXPECT_EQ(s.pushes_duplicate(), 0u) << s.shard_index();
    EXPECT_LT(s.global_step(), s.pushes_applied()) << s.shard_index();
    EXPECT_GE(s.global_step() * 2, s.pushes_applied()) << s.shard_index();
  }
}

// Polls every shard's Stats.average_target until `done` holds for all or
// `timeout` passes; returns the last targets read.
std::vector<uint32_t> WaitForTargets(Cluster& cluster, absl::Duration timeout,
                                     const std::function<bool(uint32_t)>& done) {
  const absl::Time give_up = absl::Now() + timeout;
  std::vector<uint32_t> targets;
  while (absl::Now() < give_up) {
    targets.clear();
    auto stats = cluster.Stats();
    if (stats.ok()) {
      for (const v1::StatsResponse& s : *stats) targets.push_back(s.average_target());
      if (std::all_of(targets.begin(), targets.end(), done)) return targets;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return targets;
}

TEST(AveragedPushTest, FreshUpdatesWaitOnlyForTrainersThatPush) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = 100'000;  // Runs until the test ends it.
  options.batch = 4;
  options.seq_len = 32;
  // A lease far longer than the waits below: only the pushes can tell.
  options.shard_flags = {"--worker_lease_s=60", "--unit_lease_s=120"};
  testing::TrainingJob job(dir.path() + "/job", *tokens, options);
  ASSERT_TRUE(job.StartShards(/*durable=*/false).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(job.StartTrainer().ok());
  auto cluster = Cluster::Connect(job.shards().addresses());
  ASSERT_TRUE(cluster.ok());
  std::vector<uint32_t> targets =
      WaitForTargets(**cluster, absl::Seconds(60), [](uint32_t t) { return t == 2; });
  ASSERT_EQ(targets, std::vector<uint32_t>({2, 2})) << testing::LogTails(job.dir());

  // A worker registers and never pushes: no update waits for it.
  auto coordinator = CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", job.shards().port(0)));
  ASSERT_TRUE(coordinator.ok());
  ASSERT_TRUE((*coordinator)->Register("idle", 0).ok());
  targets = WaitForTargets(**cluster, absl::Seconds(1.5), [](uint32_t t) { return t != 2; });
  EXPECT_EQ(targets, std::vector<uint32_t>({2, 2})) << "a registration counted before its push";

  // kill -9: every shard stops waiting for it within seconds, not at the
  // end of its 60 s lease.
  const absl::Time killed = absl::Now();
  job.trainers()[0]->Signal(SIGKILL);
  targets = WaitForTargets(**cluster, absl::Seconds(15), [](uint32_t t) { return t == 1; });
  EXPECT_EQ(targets, std::vector<uint32_t>({1, 1})) << testing::LogTails(job.dir());
  std::cout << "averaged: a killed trainer stopped counting after "
            << absl::ToDoubleSeconds(absl::Now() - killed) << " s" << std::endl;
}

// Reads shard i's log in `dir` ("" while it cannot be read).
std::string ShardLog(const std::string& dir, int i) {
  return ReadFile(absl::StrCat(dir, "/shard", i, ".log")).value_or("");
}

// A trainer with no unit to take (the job's last ones leased to others)
// leaves the shards, so that the updates of the trainers still at work do
// not wait out --average_wait_ms for it each; once a unit comes back it
// counts again from its next push.
TEST(AveragedPushTest, ATrainerWithNoUnitToTakeStopsCountingUntilItHasOne) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = 12;
  options.batch = 4;
  options.seq_len = 32;
  options.shard_flags = {"--worker_lease_s=60", "--unit_lease_s=120"};
  testing::TrainingJob job(dir.path() + "/job", *tokens, options);
  ASSERT_TRUE(job.StartShards(/*durable=*/false).ok());
  ASSERT_TRUE(job.StartTrainer().ok());
  // Another lessee holds one unit: the trainer trains the rest, then waits.
  auto coordinator = CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", job.shards().port(0)));
  ASSERT_TRUE(coordinator.ok());
  auto holder = (*coordinator)->Register("holder", 0);
  ASSERT_TRUE(holder.ok()) << holder.status();
  absl::StatusOr<v1::AcquireUnitResponse> held;
  for (int attempt = 0; attempt < 600; ++attempt) {
    held = (*coordinator)->Acquire(holder->worker_id());
    if (!held.ok() || held->outcome() != v1::AcquireUnitResponse::OUTCOME_WAIT) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->outcome(), v1::AcquireUnitResponse::OUTCOME_UNIT) << held->DebugString();

  const char* kLeft = "stops counting: it left";
  auto both_logs_have = [&](const char* words) {
    return ShardLog(job.dir(), 0).find(words) != std::string::npos &&
           ShardLog(job.dir(), 1).find(words) != std::string::npos;
  };
  for (int i = 0; i < 1200 && !both_logs_have(kLeft); ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(both_logs_have(kLeft)) << testing::LogTails(job.dir());
  EXPECT_EQ(job.Running().size(), 1u);  // Idle, not done: the held unit is still out.
  auto cluster = Cluster::Connect(job.shards().addresses());
  ASSERT_TRUE(cluster.ok());
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const v1::StatsResponse& s : *stats) EXPECT_EQ(s.live_pushers(), 0u) << s.shard_index();

  ASSERT_TRUE((*coordinator)
                  ->Release(holder->worker_id(), held->unit().epoch(), held->unit().index())
                  .ok());
  auto done = job.WaitDone(absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << testing::LogTails(job.dir());
  for (int i = 0; i < 2; ++i) {
    const std::string log = ShardLog(job.dir(), i);
    const size_t left = log.find(kLeft);
    EXPECT_NE(log.find("counts from its first push", left), std::string::npos)
        << "shard " << i << " did not count the trainer again:\n"
        << log;
  }
}

}  // namespace
}  // namespace spotps
