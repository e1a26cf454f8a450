// A lessee dies after its push landed on the shards but before it committed
// the unit: the unit is re-issued, and its next lessee (a real trainer
// process) pushes under the same id, derived from the unit's push key, so
// every shard answers `duplicate` and takes that batch's gradient once. The
// dead lessee is played by this test through the client library: it leases
// a unit, pushes for it as a trainer would, and stops heartbeating, which is
// what a kill -9 between push and commit leaves behind.
#include <gtest/gtest.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

constexpr int kUnits = 30, kBatch = 4;

// Leases a unit as worker "dead", pushes a gradient for all of its rows
// under the id a trainer would use, and never commits it. Returns the id.
absl::StatusOr<std::string> PushAndDie(testing::TrainingJob& job) {
  auto coordinator = CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", job.shards().port(0)));
  if (!coordinator.ok()) return coordinator.status();
  auto registered = (*coordinator)->Register("dead", 0);
  if (!registered.ok()) return registered.status();
  absl::StatusOr<v1::AcquireUnitResponse> unit;
  for (int attempt = 0; attempt < 100; ++attempt) {
    unit = (*coordinator)->Acquire(registered->worker_id());
    if (!unit.ok() || unit->outcome() != v1::AcquireUnitResponse::OUTCOME_WAIT) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (!unit.ok()) return unit.status();
  if (unit->outcome() != v1::AcquireUnitResponse::OUTCOME_UNIT) {
    return absl::InternalError(absl::StrCat("no unit for the dead lessee: ", unit->DebugString()));
  }
  const std::string push_id = UnitPushId(unit->unit().push_key(), 0, kBatch);
  if (push_id.empty()) {
    return absl::InternalError(
        absl::StrCat("unit without a usable push key: ", unit->unit().DebugString()));
  }
  auto cluster = Cluster::Connect(job.shards().addresses());
  if (!cluster.ok()) return cluster.status();
  if (absl::Status s = (*cluster)->FetchLayout(); !s.ok()) return s;
  WeightSnapshot weights;
  if (absl::Status s = (*cluster)->Pull(v1::DTYPE_BF16, &weights); !s.ok()) return s;
  std::vector<float> gradient(weights.values.size(), 1e-3f);
  auto pushed = (*cluster)->Push(gradient, weights.versions, v1::DTYPE_BF16, push_id);
  if (!pushed.ok()) return pushed.status();
  if (pushed->duplicate) return absl::InternalError("the dead lessee's push was a duplicate");
  return push_id;
}

// The key comes from the network: one a shard would refuse inside a push id
// (or that could pass for another unit's) gives no id, and the trainer
// draws a fresh one.
TEST(ReissuedUnitTest, APushIdComesOnlyFromAUsableKey) {
  EXPECT_EQ(UnitPushId("00ab.0.7", 0, 16), "u00ab.0.7/0-16");
  EXPECT_NE(UnitPushId("00ab.0.7", 0, 8), UnitPushId("00ab.0.7", 8, 16));
  EXPECT_EQ(UnitPushId("", 0, 16), "");
  EXPECT_EQ(UnitPushId(std::string(65, 'k'), 0, 16), "");
  EXPECT_EQ(UnitPushId(std::string(64, 'k'), 0, 16).size(), 64u + 6u);
  for (const char* bad : {"a b", "a\nb", "a\x7f", "\xc3\xa9"}) EXPECT_EQ(UnitPushId(bad, 0, 1), "");
  EXPECT_EQ(UnitPushId(std::string("a\0b", 3), 0, 1), "");
}

TEST(ReissuedUnitTest, ABatchWhoseLesseeDiedAfterItsPushIsAppliedOnceOnEveryShard) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = kUnits;
  options.batch = kBatch;
  options.seq_len = 32;
  testing::TrainingJob job(dir.path() + "/job", *tokens, options);
  ASSERT_TRUE(job.StartShards(/*durable=*/false).ok());
  ASSERT_TRUE(job.StartTrainer().ok());
  // The trainer initialises the model; the dead lessee pushes into it.
  auto cluster = Cluster::Connect(job.shards().addresses());
  ASSERT_TRUE(cluster.ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (absl::Now() < give_up) {
    auto stats = (*cluster)->Stats();
    if (stats.ok() && (*stats)[0].pushes_applied() > 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::StatusOr<std::string> push_id = PushAndDie(job);
  ASSERT_TRUE(push_id.ok()) << push_id.status() << testing::LogTails(job.dir());

  auto done = job.WaitDone(absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status() << testing::LogTails(job.dir());
  EXPECT_EQ(done->epochs(0).committed(), static_cast<uint64_t>(kUnits));
  EXPECT_GE(done->epochs(0).reissued(), 1u) << "the dead lessee's unit was never re-issued";
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const v1::StatsResponse& shard : *stats) {
    // One gradient per unit, the dead lessee's among them, and the trainer's
    // push of the same unit answered as a duplicate.
    EXPECT_EQ(shard.pushes_applied(), static_cast<uint64_t>(kUnits))
        << "shard " << shard.shard_index() << testing::LogTails(job.dir());
    EXPECT_GE(shard.pushes_duplicate(), 1u) << "shard " << shard.shard_index();
  }
  EXPECT_EQ(job.Shutdown(), 0) << testing::LogTails(job.dir());
  auto log = ReadFile(job.dir() + "/trainer0.log");
  ASSERT_TRUE(log.ok());
  // The trainer committed the re-issued unit: the dead lessee never did.
  EXPECT_EQ(testing::LogField(*log, "units"), kUnits) << *log;
  std::cout << "reissued: unit pushed under " << *push_id << ", applied once on " << stats->size()
            << " shards" << std::endl;
}

}  // namespace
}  // namespace spotps
