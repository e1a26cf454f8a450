// Weight subscription against 2 real shard processes in sync mode, driven
// round by round through shard 0's coordinator: the subscriber sees every
// round exactly once, in order, each snapshot whole (every partition of
// both shards from the same round) and equal to the weights the round made.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "client/weight_subscription.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::LocalShardCluster;
using testing::TempDir;

constexpr double kLr = 0.0625;  // A power of two: lr * g is exact.
constexpr int kRounds = 6;

float Pattern(int64_t i) { return static_cast<float>(i % 5 - 2); }
// The weights every test initialises its shards with.
std::vector<float> InitialWeights(int64_t n) {
  std::vector<float> w(n);
  for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(i % 64) * 0.125f;
  return w;
}

TEST(WatchMultiProcessTest, ASubscriberSeesEverySyncRoundWholeAndInOrder) {
  TempDir dir;
  auto shards = LocalShardCluster::Start(
      2,
      [](int i, const std::string& addresses) {
        std::vector<std::string> f = {"--optimizer=sgd", absl::StrCat("--lr=", kLr),
                                      "--consistency=sync"};
        if (i == 0) {
          f.insert(f.end(), {"--epochs=1", absl::StrCat("--units_per_epoch=", kRounds + 2),
                             "--peers=" + addresses.substr(addresses.find(',') + 1)});
        }
        return f;
      },
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto trainer = *Cluster::Connect((*shards)->addresses());
  auto coordinator = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", (*shards)->port(0)));
  const ModelLayout layout =
      *ModelLayout::Create({{"embed", {512, 1100}}, {"w", {300, 300}}, {"b", {9}}});
  const int64_t n = layout.total_elements();
  const std::vector<float> w0 = InitialWeights(n);
  ASSERT_TRUE(trainer->Init(layout, w0).ok());

  // The serving replica: its own Cluster, a snapshot per sync round.
  auto replica = *Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(replica->FetchLayout().ok());
  SubscriptionOptions options;
  options.consistency = SnapshotConsistency::kSyncRound;
  options.min_interval = absl::Milliseconds(20);
  absl::Mutex mu;
  std::vector<uint64_t> seen_rounds;
  std::vector<std::string> problems;
  auto sub = WeightSubscription::Start(replica.get(), options, [&](const WeightSnapshot& w) {
    absl::MutexLock lock(&mu);
    const uint64_t round = w.versions.front();
    for (uint64_t v : w.versions) {
      if (v != round) problems.push_back(absl::StrCat("mixed versions in round ", round));
    }
    for (int64_t i = 0; i < n; ++i) {
      const float want = w0[i] - static_cast<float>(kLr) * static_cast<float>(round) * Pattern(i);
      if (w.values[i] != want) {
        problems.push_back(absl::StrCat("round ", round, ": element ", i, " is ", w.values[i],
                                        ", the round made ", want));
        break;
      }
    }
    seen_rounds.push_back(round);
  });
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE((*sub)->WaitForPublished(0, absl::Seconds(10)));  // Round 0: the initial weights.

  // One worker: each round closes as soon as its one gradient is committed.
  const uint64_t worker = coordinator->Register("a")->worker_id();
  for (int round = 1; round <= kRounds; ++round) {
    auto grant = coordinator->Acquire(worker);
    ASSERT_TRUE(grant.ok()) << grant.status();
    WeightSnapshot w;
    ASSERT_TRUE(trainer->Pull(v1::DTYPE_FP32, &w).ok());
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i) g[i] = Pattern(i);
    const std::string push_id = trainer->NewPushId();
    auto pushed = trainer->Push(g, w.versions, v1::DTYPE_BF16, push_id);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    ASSERT_TRUE(
        coordinator->Commit(worker, grant->unit().epoch(), grant->unit().index(), push_id).ok());
    // A replica may skip rounds that come faster than it follows (it
    // publishes the newest); this test wants each one, so it waits for it.
    absl::MutexLock lock(&mu);
    const auto seen = [&] {
      return !seen_rounds.empty() && seen_rounds.back() >= static_cast<uint64_t>(round);
    };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(20)))
        << "the replica did not see round " << round;
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up) {
    auto latest = (*sub)->Latest();
    if (latest != nullptr && latest->versions.front() == static_cast<uint64_t>(kRounds)) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  (*sub)->Stop();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(problems.empty()) << problems.front();
  std::vector<uint64_t> want(kRounds + 1);
  for (int r = 0; r <= kRounds; ++r) want[r] = r;
  EXPECT_EQ(seen_rounds, want);  // Every round, once, in order.
}

// A shard going down ends its watchers at once (it does not wait out its
// grace period for them), and the subscription follows the shard's
// restart: it publishes the weights a push made after it.
TEST(WatchMultiProcessTest, ShutdownEndsWatchesAtOnceAndTheSubscriptionFollowsARestart) {
  TempDir dir;
  auto shards = LocalShardCluster::Start(
      2,
      [](int, const std::string&) {
        return std::vector<std::string>{"--optimizer=sgd", absl::StrCat("--lr=", kLr),
                                        "--shutdown_grace_s=60"};
      },
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto trainer = *Cluster::Connect((*shards)->addresses());
  const ModelLayout layout = *ModelLayout::Create({{"a", {700, 300}}, {"b", {300, 300}}});
  const int64_t n = layout.total_elements();
  const std::vector<float> w0 = InitialWeights(n);
  ASSERT_TRUE(trainer->Init(layout, w0).ok());
  auto replica = *Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(replica->FetchLayout().ok());
  SubscriptionOptions options;
  options.min_interval = absl::Milliseconds(20);
  auto sub = WeightSubscription::Start(replica.get(), options);
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE((*sub)->WaitForPublished(0, absl::Seconds(10)));

  const absl::Time start = absl::Now();
  (*shards)->shard(1).Signal(SIGTERM);
  auto code = (*shards)->shard(1).Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // Not the 60 s grace.

  ASSERT_TRUE((*shards)->Restart(1).ok());
  // The restarted shard starts empty: only it keeps this second Init.
  absl::StatusOr<InitOutcome> init = trainer->Init(layout, w0);
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_EQ(init->shards_applied, 1);
  EXPECT_FALSE(init->everywhere() || init->nowhere());
  WeightSnapshot w;
  ASSERT_TRUE(trainer->Pull(v1::DTYPE_FP32, &w).ok());
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = Pattern(i);
  ASSERT_TRUE(trainer->Push(g, w.versions, v1::DTYPE_BF16).ok());
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = w0[i] - static_cast<float>(kLr) * Pattern(i);
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  std::shared_ptr<const WeightSnapshot> latest;
  while (absl::Now() < give_up) {
    latest = (*sub)->Latest();
    if (latest->values == want) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(latest->values, want) << (*sub)->last_error();
  for (uint64_t v : latest->versions) EXPECT_EQ(v, 1u);
}

// kCheckpointRound publishes exactly the weights of each checkpoint round
// (every partition of both shards at its version in that checkpoint), and
// nothing between checkpoints.
TEST(WatchMultiProcessTest, ACheckpointRoundSubscriberSeesEachCheckpointAndNothingElse) {
  TempDir dir;
  const std::string root = dir.path();
  auto shards = LocalShardCluster::Start(
      2,
      [root](int i, const std::string& addresses) {
        std::vector<std::string> f = {"--optimizer=sgd", absl::StrCat("--lr=", kLr),
                                      "--consistency=sync",
                                      absl::StrCat("--checkpoint_dir=", root, "/ckpt", i)};
        if (i == 0) {
          f.insert(f.end(), {"--epochs=1", "--units_per_epoch=8",
                             "--peers=" + addresses.substr(addresses.find(',') + 1)});
        }
        return f;
      },
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  auto trainer = *Cluster::Connect((*shards)->addresses());
  auto coordinator = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", (*shards)->port(0)));
  const ModelLayout layout = *ModelLayout::Create({{"a", {700, 300}}, {"b", {300, 300}}});
  const int64_t n = layout.total_elements();
  const std::vector<float> w0 = InitialWeights(n);
  ASSERT_TRUE(trainer->Init(layout, w0).ok());
  const uint64_t worker = coordinator->Register("a")->worker_id();
  auto run_round = [&] {
    auto grant = coordinator->Acquire(worker);
    ASSERT_TRUE(grant.ok()) << grant.status();
    WeightSnapshot w;
    ASSERT_TRUE(trainer->Pull(v1::DTYPE_FP32, &w).ok());
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i) g[i] = Pattern(i);
    const std::string push_id = trainer->NewPushId();
    ASSERT_TRUE(trainer->Push(g, w.versions, v1::DTYPE_BF16, push_id).ok());
    ASSERT_TRUE(
        coordinator->Commit(worker, grant->unit().epoch(), grant->unit().index(), push_id).ok());
  };
  // Waits until every shard's partitions are at `round` (the round applied).
  auto wait_for_round = [&](uint64_t round) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (absl::Now() < give_up) {
      WeightSnapshot w;
      if (trainer->Pull(v1::DTYPE_FP32, &w).ok() &&
          std::all_of(w.versions.begin(), w.versions.end(),
                      [round](uint64_t v) { return v == round; })) {
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "round " << round << " was not applied";
  };

  auto replica = *Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(replica->FetchLayout().ok());
  SubscriptionOptions options;
  options.consistency = SnapshotConsistency::kCheckpointRound;
  options.min_interval = absl::Milliseconds(20);
  auto sub = WeightSubscription::Start(replica.get(), options);
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto expect_published = [&](int64_t count, uint64_t round, uint64_t checkpoint) {
    ASSERT_TRUE((*sub)->WaitForPublished(count - 1, absl::Seconds(10))) << (*sub)->last_error();
    auto latest = (*sub)->Latest();
    EXPECT_EQ((*sub)->published_checkpoint_id(), checkpoint);
    for (uint64_t v : latest->versions) ASSERT_EQ(v, round);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(latest->values[i],
                w0[i] - static_cast<float>(kLr) * static_cast<float>(round) * Pattern(i))
          << i;
    }
  };

  run_round();
  wait_for_round(1);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ((*sub)->published(), 0);  // No checkpoint yet.
  auto first = coordinator->CheckpointNow();
  ASSERT_TRUE(first.ok()) << first.status();
  expect_published(1, 1, first->checkpoint_id());

  run_round();
  wait_for_round(2);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ((*sub)->published(), 1);  // Round 2 has no checkpoint.
  auto second = coordinator->CheckpointNow();
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_GT(second->checkpoint_id(), first->checkpoint_id());
  expect_published(2, 2, second->checkpoint_id());

  // A checkpoint of unchanged weights is a new checkpoint round all the same.
  auto third = coordinator->CheckpointNow();
  ASSERT_TRUE(third.ok()) << third.status();
  expect_published(3, 2, third->checkpoint_id());
  EXPECT_EQ((*sub)->published(), 3);
}

}  // namespace
}  // namespace spotps
