// Sync rounds across 2 real shard processes, driven by shard 0's
// coordinator: each round applies the exact mean of the committed gradients
// on both shards, and a gradient whose worker died before committing is
// left out everywhere (its unit is trained again).
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::LocalShardCluster;
using testing::TempDir;

constexpr double kLr = 0.0625;  // A power of two: lr * g is exact.

// Small integers: exact in BF16, and the means below are exact too.
float Pattern(int64_t i) { return static_cast<float>(i % 5 - 2); }

class SyncMultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto shards = LocalShardCluster::Start(
        2,
        [](int i, const std::string& addresses) {
          std::vector<std::string> f = {"--optimizer=sgd", absl::StrCat("--lr=", kLr),
                                        "--consistency=sync"};
          if (i == 0) {
            f.insert(f.end(), {"--epochs=1", "--units_per_epoch=6", "--worker_lease_s=2",
                               "--peers=" + addresses.substr(addresses.find(',') + 1)});
          }
          return f;
        },
        dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    cluster_ = *Cluster::Connect(shards_->addresses());
    coordinator_ = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
    layout_ = *ModelLayout::Create({{"embed", {512, 1100}}, {"w", {300, 300}}, {"b", {9}}});
  }

  uint64_t Join(const std::string& name) { return coordinator_->Register(name)->worker_id(); }

  // Takes a unit, pulls the round's weights and pushes scale * Pattern.
  struct Step {
    v1::WorkUnit unit;
    std::string push_id;
  };
  Step TrainStep(uint64_t worker, float scale) {
    auto grant = coordinator_->Acquire(worker);
    EXPECT_TRUE(grant.ok()) << grant.status();
    EXPECT_EQ(grant->outcome(), v1::AcquireUnitResponse::OUTCOME_UNIT);
    WeightSnapshot w;
    EXPECT_TRUE(cluster_->Pull(v1::DTYPE_FP32, &w).ok());
    std::vector<float> g(layout_.total_elements());
    for (size_t i = 0; i < g.size(); ++i) g[i] = scale * Pattern(static_cast<int64_t>(i));
    Step step{grant->unit(), cluster_->NewPushId()};
    auto pushed = cluster_->Push(g, w.versions, v1::DTYPE_BF16, step.push_id);
    EXPECT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_TRUE(pushed->deferred);
    return step;
  }
  void Commit(uint64_t worker, const Step& s) {
    auto r = coordinator_->Commit(worker, s.unit.epoch(), s.unit.index(), s.push_id);
    EXPECT_TRUE(r.ok()) << r.status();
  }
  std::vector<float> Weights(std::vector<uint64_t>* versions = nullptr) {
    WeightSnapshot w;
    EXPECT_TRUE(cluster_->Pull(v1::DTYPE_FP32, &w).ok());
    if (versions != nullptr) *versions = w.versions;
    return w.values;
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  ModelLayout layout_;
};

TEST_F(SyncMultiProcessTest, RoundsApplyTheExactMeanOfCommittedGradientsOnEveryShard) {
  const int64_t n = layout_.total_elements();
  std::vector<float> w0(n);
  for (int64_t i = 0; i < n; ++i) w0[i] = static_cast<float>(i % 64) * 0.125f;
  ASSERT_TRUE(cluster_->Init(layout_, w0).ok());
  const uint64_t a = Join("a"), b = Join("b"), c = Join("c");

  // Round 1: three gradients 1p, 2p, 3p; their mean is 2p.
  const Step a1 = TrainStep(a, 1), b1 = TrainStep(b, 2), c1 = TrainStep(c, 3);
  Commit(a, a1);
  Commit(b, b1);
  EXPECT_EQ(Weights(), w0);  // Held until every live worker gave its gradient.
  Commit(c, c1);

  // Round 2 opens once round 1 is applied on both shards; `c` pushes a huge
  // gradient, then dies before committing it.
  const Step a2 = TrainStep(a, 1);
  std::vector<uint64_t> versions;
  const std::vector<float> w1 = Weights(&versions);
  for (uint64_t v : versions) EXPECT_EQ(v, 1u);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(w1[i], w0[i] - static_cast<float>(kLr) * 2.0f * Pattern(i)) << i;
  }
  const Step b2 = TrainStep(b, 3);
  const Step dead = TrainStep(c, 1000);
  Commit(a, a2);
  Commit(b, b2);
  // The round waits for `c` until its lease (2 s) runs out, then closes.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up && coordinator_->Progress()->epochs(0).committed() < 5) {
    ASSERT_TRUE(coordinator_->Heartbeat(a).ok());
    ASSERT_TRUE(coordinator_->Heartbeat(b).ok());
    absl::SleepFor(absl::Milliseconds(200));
  }
  const std::vector<float> w2 = Weights(&versions);
  for (uint64_t v : versions) EXPECT_EQ(v, 2u);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(w2[i], w1[i] - static_cast<float>(kLr) * 2.0f * Pattern(i)) << i;  // (1p+3p)/2.
  }
  auto stats = cluster_->Stats();
  ASSERT_TRUE(stats.ok());
  for (const auto& s : *stats) {
    EXPECT_EQ(s.global_step(), 2u);          // One update per round.
    EXPECT_EQ(s.pushes_applied(), 5u);       // 3 + 2 gradients.
    EXPECT_EQ(s.round_contributions(), 0u);  // The dead one's was dropped.
  }
  auto progress = coordinator_->Progress();
  EXPECT_EQ(progress->epochs(0).reissued(), 1u);
  EXPECT_EQ(progress->workers_expired(), 1u);
  EXPECT_EQ(progress->sync_rounds_applied(), 2u);
  // The dead worker's unit is the first one handed out again.
  auto next = coordinator_->Acquire(a);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->unit().index(), dead.unit.index());
  EXPECT_EQ(
      coordinator_->Commit(c, dead.unit.epoch(), dead.unit.index(), dead.push_id).status().code(),
      absl::StatusCode::kAborted);  // The round went on without it.
}

// A cluster whose shards disagree on the mode is refused loudly by the
// client, not left to train half its partitions in rounds.
TEST(SyncMisconfigurationTest, ShardsThatDisagreeOnTheModeFailThePush) {
  TempDir dir;
  auto shards = LocalShardCluster::Start(
      2,
      [](int i, const std::string& addresses) {
        std::vector<std::string> f = {"--optimizer=sgd", "--lr=0.5"};
        if (i == 0) {
          f.insert(f.end(), {"--consistency=sync", "--epochs=1", "--units_per_epoch=4",
                             "--peers=" + addresses.substr(addresses.find(',') + 1)});
        }
        return f;
      },
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto cluster = Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(cluster.ok());
  const ModelLayout layout = *ModelLayout::Create({{"w", {1000, 1000}}});
  ASSERT_TRUE((*cluster)->Init(layout, std::vector<float>(layout.total_elements(), 1.0f)).ok());
  WeightSnapshot w;
  ASSERT_TRUE((*cluster)->Pull(v1::DTYPE_FP32, &w).ok());
  auto pushed = (*cluster)->Push(std::vector<float>(layout.total_elements(), 1.0f), w.versions,
                                 v1::DTYPE_BF16);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(pushed.status().message().find("same --consistency"), absl::string_view::npos)
      << pushed.status();
}

}  // namespace
}  // namespace spotps
