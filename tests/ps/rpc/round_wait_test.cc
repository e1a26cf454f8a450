// Local mode's averaging wait against a real shard process: two clients
// that push once a round teach the shard their round time, and from then
// on an update waits a quarter of it for a round's last push, not only
// --average_wait_ms. Rounds of H steps drift apart by far more than a
// fixed wait on a large model; an update per push would step the outer
// momentum once per push instead of once per round.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cluster.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::LocalShardCluster;
using testing::TempDir;

constexpr int kWaitMs = 200;                         // The shard's --average_wait_ms.
constexpr absl::Duration kRound = absl::Seconds(3);  // Between two of a client's pushes.

ModelLayout Layout() { return *ModelLayout::Create({{"block.w", {64, 64}}, {"head", {8}}}); }

class RoundWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto shards = LocalShardCluster::Start(
        1, {"--consistency=local:4", absl::StrCat("--average_wait_ms=", kWaitMs)}, dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    for (int i = 0; i < 2; ++i) {
      auto c = Cluster::Connect(shards_->addresses());
      ASSERT_TRUE(c.ok()) << c.status();
      clients_.push_back(*std::move(c));
    }
    const ModelLayout layout = Layout();
    ASSERT_TRUE(clients_[0]->Init(layout, std::vector<float>(layout.total_elements(), 1)).ok());
    ASSERT_TRUE(clients_[1]->FetchLayout().ok());
    for (auto& c : clients_) ASSERT_TRUE(c->Join().ok());
  }

  // One round: each client pulls, then pushes a pseudo-gradient, the second
  // `lag` after the first. Both pushes are answered once applied (local mode
  // is "fresh"); returns the version each reported for partition 0.
  std::vector<uint64_t> Round(absl::Duration lag) {
    std::vector<uint64_t> versions(2, kNoVersion);
    std::vector<std::thread> pushes;
    for (int i = 0; i < 2; ++i) {
      pushes.emplace_back([&, i] {
        WeightSnapshot snapshot;
        ASSERT_TRUE(clients_[i]->Pull(v1::DTYPE_FP32, &snapshot).ok());
        if (i == 1) absl::SleepFor(lag);
        const std::vector<float> g(snapshot.values.size(), 0.01f);
        auto pushed = clients_[i]->Push(g, snapshot.versions, v1::DTYPE_FP32);
        ASSERT_TRUE(pushed.ok()) << pushed.status();
        versions[i] = pushed->versions[0];
      });
    }
    for (auto& t : pushes) t.join();
    return versions;
  }

  int AverageWaitMs() {
    auto stats = clients_[0]->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? static_cast<int>((*stats)[0].average_wait_ms()) : -1;
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::vector<std::unique_ptr<Cluster>> clients_;
};

TEST_F(RoundWaitTest, AnUpdateWaitsAQuarterOfTheRoundForItsLastPush) {
  // Before any round time is known, the flag's wait.
  EXPECT_EQ(AverageWaitMs(), kWaitMs);
  for (int round = 0; round < 3; ++round) {
    const absl::Time start = absl::Now();
    const std::vector<uint64_t> v = Round(absl::ZeroDuration());
    EXPECT_EQ(v[0], v[1]) << "round " << round << ": both pushes in one update";
    absl::SleepFor(kRound - (absl::Now() - start));
  }
  // Rounds of ~3 s: the wait is ~750 ms.
  const int wait_ms = AverageWaitMs();
  EXPECT_GE(wait_ms, 600);
  EXPECT_LE(wait_ms, 900);
  // A push twice the flag's wait behind the first still joins its update;
  // with --average_wait_ms alone the first would be applied on its own.
  const std::vector<uint64_t> v = Round(absl::Milliseconds(2 * kWaitMs));
  EXPECT_EQ(v[0], v[1]);
}

}  // namespace
}  // namespace spotps
