// Real shard processes on loopback, real clients: no update lost or doubled.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "client/cluster.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::LocalShardCluster;
using testing::TempDir;

constexpr double kLr = 0.0625;  // A power of two: lr * g is exact.

ModelLayout Layout() {
  return *ModelLayout::Create(
      {{"embed", {512, 600}}, {"block.w", {300, 300}}, {"block.b", {300}}, {"head", {7}}});
}

// Exactly representable in BF16 and FP32; sums of a few dozen stay exact.
float Gradient(int client, int step, int64_t i) {
  return static_cast<float>(((client + 1) * (step + 3) + i) % 5 - 2);
}

constexpr int kShards = 2;

float InitialWeight(int64_t i) { return static_cast<float>(i % 64) * 0.125f; }

class MultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every push applied on its own (not the default's averaging), so the
    // weights are exactly the initial ones minus lr times every gradient.
    auto shards = LocalShardCluster::Start(
        kShards, {"--optimizer=sgd", "--lr=" + std::to_string(kLr), "--staleness_method=none"},
        dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
  }

  std::unique_ptr<Cluster> Connect() {
    auto c = Cluster::Connect(shards_->addresses());
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
};

TEST_F(MultiProcessTest, ConcurrentPushesSumExactly) {
  const ModelLayout layout = Layout();
  const int64_t n = layout.total_elements();
  std::vector<float> w0(n);
  for (int64_t i = 0; i < n; ++i) w0[i] = InitialWeight(i);

  constexpr int kClients = 3, kSteps = 12;
  std::vector<std::unique_ptr<Cluster>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(Connect());
  // All clients race to initialise; exactly the first wins on each shard.
  std::vector<absl::StatusOr<InitOutcome>> inits(kClients);
  {
    std::vector<std::thread> racers;
    for (int c = 0; c < kClients; ++c) {
      racers.emplace_back([&, c] { inits[c] = clients[c]->Init(layout, w0); });
    }
    for (auto& t : racers) t.join();
  }
  int wins = 0;
  for (auto& r : inits) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->shards, kShards);
    wins += r->shards_applied;
  }
  EXPECT_EQ(wins, kShards) << "each shard keeps exactly one racer's values";

  std::vector<absl::Status> errors(kClients);
  std::vector<int> duplicates(kClients, 0);
  std::vector<std::thread> workers;
  for (int c = 0; c < kClients; ++c) {
    workers.emplace_back([&, c] {
      Cluster& cluster = *clients[c];
      WeightSnapshot weights;
      std::vector<float> g(n);
      for (int step = 0; step < kSteps && errors[c].ok(); ++step) {
        if (absl::Status s = cluster.Pull(v1::DTYPE_BF16, &weights); !s.ok()) {
          errors[c] = s;
          break;
        }
        for (int64_t i = 0; i < n; ++i) g[i] = Gradient(c, step, i);
        const v1::DType wire = step % 2 == 0 ? v1::DTYPE_BF16 : v1::DTYPE_FP32;
        const std::string id = cluster.NewPushId();
        auto pushed = cluster.Push(g, weights.versions, wire, id);
        if (!pushed.ok()) {
          errors[c] = pushed.status();
          break;
        }
        if (step == kSteps / 2) {  // A retry of a push that landed.
          auto again = cluster.Push(g, weights.versions, wire, id);
          if (!again.ok())
            errors[c] = again.status();
          else
            duplicates[c] += again->duplicate ? 1 : 0;
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  for (int c = 0; c < kClients; ++c) {
    ASSERT_TRUE(errors[c].ok()) << "client " << c << ": " << errors[c];
    EXPECT_EQ(duplicates[c], 1) << "client " << c;
  }

  auto reader = Connect();
  ASSERT_TRUE(reader->FetchLayout().ok());
  WeightSnapshot final_weights;
  ASSERT_TRUE(reader->Pull(v1::DTYPE_FP32, &final_weights).ok());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int c = 0; c < kClients; ++c) {
      for (int step = 0; step < kSteps; ++step) sum += Gradient(c, step, i);
    }
    const float expected = static_cast<float>(w0[i] - kLr * sum);
    if (final_weights.values[i] != expected && mismatches++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << final_weights.values[i] << " != " << expected;
    }
  }
  EXPECT_EQ(mismatches, 0);
  for (uint64_t v : final_weights.versions) EXPECT_EQ(v, uint64_t{kClients * kSteps});
  auto stats = reader->Stats();
  ASSERT_TRUE(stats.ok());
  for (const auto& s : *stats) {
    EXPECT_EQ(s.pushes_applied(), uint64_t{kClients * kSteps});
    EXPECT_EQ(s.pushes_duplicate(), uint64_t{kClients});
  }
}

TEST_F(MultiProcessTest, NamedTensorsAndConditionalPulls) {
  auto cluster = Connect();
  const ModelLayout layout = Layout();
  std::vector<float> w0(layout.total_elements(), 1.0f);
  absl::StatusOr<InitOutcome> init = cluster->Init(layout, w0);
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_TRUE(init->everywhere());
  WeightSnapshot weights;
  ASSERT_TRUE(cluster->Pull(v1::DTYPE_BF16, &weights).ok());
  EXPECT_EQ(weights.partitions_received,
            static_cast<int64_t>(cluster->partition_map().partitions().size()));
  ASSERT_TRUE(cluster->Pull(v1::DTYPE_BF16, &weights).ok());
  EXPECT_EQ(weights.partitions_received, 0);  // Nothing changed.

  const std::vector<float> g(layout.Find("block.b")->num_elements, 8.0f);
  ASSERT_TRUE(cluster->PushTensors({{"block.b", g}}, weights.versions, v1::DTYPE_BF16).ok());
  auto bias = cluster->PullTensor("block.b", v1::DTYPE_FP32);
  ASSERT_TRUE(bias.ok()) << bias.status();
  for (float v : *bias) ASSERT_EQ(v, 0.5f);  // 1 - 0.0625 * 8.
  auto head = cluster->PullTensor("head", v1::DTYPE_FP32);
  ASSERT_TRUE(head.ok());
  for (float v : *head) ASSERT_EQ(v, 1.0f);
  ASSERT_TRUE(cluster->Pull(v1::DTYPE_BF16, &weights).ok());
  EXPECT_GE(weights.partitions_received, 1);
  EXPECT_LE(weights.partitions_received, 2);  // Only what holds block.b.
  EXPECT_EQ(cluster->PullTensor("nope", v1::DTYPE_FP32).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(MultiProcessTest, MisorderedShardListIsDetected) {
  auto init = Connect();
  ASSERT_TRUE(init->Init(Layout(), std::vector<float>(Layout().total_elements(), 0.0f)).ok());
  const std::string reversed = "127.0.0.1:" + std::to_string(shards_->port(1)) +
                               ",127.0.0.1:" + std::to_string(shards_->port(0));
  auto cluster = Cluster::Connect(reversed);
  ASSERT_TRUE(cluster.ok());
  absl::Status s = (*cluster)->FetchLayout();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("shard-index order"), absl::string_view::npos) << s;
}

TEST_F(MultiProcessTest, UnreachableShardFailsAfterBoundedRetries) {
  shards_->shard(1).Signal(SIGKILL);
  ASSERT_TRUE(shards_->shard(1).Wait(absl::Seconds(10)).ok());
  ClusterOptions options;
  options.retry.max_attempts = 3;
  options.retry.initial_backoff = absl::Milliseconds(20);
  options.retry.deadline = absl::Seconds(2);
  auto cluster = Cluster::Connect(shards_->addresses(), options);
  ASSERT_TRUE(cluster.ok());
  const absl::Time start = absl::Now();
  absl::Status s = (*cluster)->FetchLayout();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("shard 1"), absl::string_view::npos) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(MultiProcessTest, SigtermShutsShardsDownCleanly) {
  for (int i = 0; i < 2; ++i) shards_->shard(i).Signal(SIGTERM);
  for (int i = 0; i < 2; ++i) {
    auto code = shards_->shard(i).Wait(absl::Seconds(15));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }
}

}  // namespace
}  // namespace spotps
