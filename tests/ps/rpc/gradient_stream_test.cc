// Pushes streamed partition by partition (Cluster::StartPush) and pulls that
// wait for an update (PullOptions::min_versions), against two real shards
// on loopback: a streamed push in any order with a gradient_scale moves the
// weights exactly as a push of the scaled gradient, one that is cut short
// changes nothing, and a waiting pull gets the update it waits for.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "ps/rpc/parameter_server_service.h"

namespace spotps {
namespace {

constexpr int kShards = 2;

// Two shards of one job, each behind its own server, and a client.
class TwoShards {
 public:
  explicit TwoShards(const ModelLayout& layout, int64_t average_wait_ms = 1000) {
    std::string addresses;
    for (int s = 0; s < kShards; ++s) {
      ShardOptions o;
      o.shard_index = s;
      o.num_shards = kShards;
      o.optimizer.kind = OptimizerKind::kSgd;
      o.schedule.base_lr = 0.5;  // With power-of-two gradients: exact.
      o.staleness.average_wait_ms = average_wait_ms;
      stores_.push_back(*ShardStore::Create(o));
      services_.push_back(std::make_unique<ParameterServerService>(stores_.back().get(), nullptr, 1));
      grpc::ServerBuilder builder;
      int port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      builder.RegisterService(services_.back().get());
      servers_.push_back(builder.BuildAndStart());
      EXPECT_NE(port, 0);
      addresses += (s ? "," : "") + std::string("127.0.0.1:") + std::to_string(port);
    }
    addresses_ = addresses;
    cluster_ = *Cluster::Connect(addresses);
    std::vector<float> init(layout.total_elements());
    for (size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(i % 13);
    EXPECT_TRUE(cluster_->Init(layout, init).ok());
  }
  ~TwoShards() {
    for (auto& server : servers_) server->Shutdown();
  }
  Cluster& cluster() { return *cluster_; }
  const std::string& addresses() const { return addresses_; }
  WeightSnapshot PullAll() {
    WeightSnapshot w;
    EXPECT_TRUE(cluster_->Pull(v1::DTYPE_FP32, &w).ok());
    return w;
  }

 private:
  std::vector<std::unique_ptr<ShardStore>> stores_;
  std::vector<std::unique_ptr<ParameterServerService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::string addresses_;
  std::unique_ptr<Cluster> cluster_;
};

class GradientStreamTest : public ::testing::Test {
 protected:
  // A gradient of small powers of two: times 0.25 and lr 0.5, exact in FP32.
  std::vector<float> Gradient() const {
    std::vector<float> g(layout_.total_elements());
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(1 << (i % 4)) - 4.0f;
    return g;
  }
  // Partition ids in a shuffled order.
  std::vector<uint32_t> ShuffledPartitions(Cluster& c, uint32_t seed) const {
    std::vector<uint32_t> ids(c.partition_map().partitions().size());
    for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    return ids;
  }

  ModelLayout layout_ = *ModelLayout::Create({{"w", {400, 500}}, {"b", {7}}});
};

TEST_F(GradientStreamTest, AStreamInAnyOrderEqualsAPushOfTheScaledGradient) {
  TwoShards streamed(layout_), whole(layout_);
  const std::vector<float> g = Gradient();
  WeightSnapshot base = streamed.PullAll();
  ASSERT_GE(streamed.cluster().partition_map().partitions().size(), 4u);

  auto stream = streamed.cluster().StartPush(base.versions, v1::DTYPE_FP32, "streamed-1");
  ASSERT_TRUE(stream.ok()) << stream.status();
  const PartitionMap& map = streamed.cluster().partition_map();
  for (uint32_t id : ShuffledPartitions(streamed.cluster(), 7)) {
    (*stream)->Send(id, g.data() + map.partitions()[id].flat_begin);
  }
  bool after_sent_ran = false;
  absl::StatusOr<PushResult> r = (*stream)->Finish(0.25f, [&] { after_sent_ran = true; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(after_sent_ran);
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(r->global_step, 1u);
  ASSERT_EQ(r->versions.size(), map.partitions().size());
  for (uint64_t v : r->versions) EXPECT_EQ(v, 1u);

  std::vector<float> scaled = g;
  for (float& x : scaled) x *= 0.25f;
  ASSERT_TRUE(whole.cluster().Push(scaled, base.versions, v1::DTYPE_FP32, "whole-1").ok());
  const WeightSnapshot a = streamed.PullAll(), b = whole.PullAll();
  EXPECT_EQ(a.values, b.values);
  EXPECT_NE(a.values, base.values);
  EXPECT_EQ(a.versions, b.versions);

  // The same id again, streamed: every shard reports a duplicate.
  auto again = streamed.cluster().StartPush(base.versions, v1::DTYPE_FP32, "streamed-1");
  ASSERT_TRUE(again.ok());
  for (uint32_t id : ShuffledPartitions(streamed.cluster(), 8)) {
    (*again)->Send(id, g.data() + map.partitions()[id].flat_begin);
  }
  absl::StatusOr<PushResult> dup = (*again)->Finish(0.25f);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_TRUE(dup->duplicate);
  EXPECT_EQ(streamed.PullAll().values, a.values);
}

TEST_F(GradientStreamTest, AStreamCutShortChangesNothingAndItsIdStaysFree) {
  TwoShards shards(layout_);
  const std::vector<float> g = Gradient();
  const WeightSnapshot base = shards.PullAll();
  const PartitionMap& map = shards.cluster().partition_map();
  const std::vector<uint32_t> order = ShuffledPartitions(shards.cluster(), 3);

  // Finish with one partition never sent: refused before anything is sent.
  auto partial = shards.cluster().StartPush(base.versions, v1::DTYPE_FP32, "cut-1");
  ASSERT_TRUE(partial.ok());
  for (size_t k = 0; k + 1 < order.size(); ++k) {
    (*partial)->Send(order[k], g.data() + map.partitions()[order[k]].flat_begin);
  }
  absl::StatusOr<PushResult> refused = (*partial)->Finish(1.0f);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  partial->reset();

  // Dropped halfway (a trainer whose backward failed).
  auto dropped = shards.cluster().StartPush(base.versions, v1::DTYPE_FP32, "cut-1");
  ASSERT_TRUE(dropped.ok());
  for (size_t k = 0; k < order.size() / 2; ++k) {
    (*dropped)->Send(order[k], g.data() + map.partitions()[order[k]].flat_begin);
  }
  dropped->reset();

  const WeightSnapshot after = shards.PullAll();
  EXPECT_EQ(after.values, base.values);
  EXPECT_EQ(after.versions, base.versions);
  // Nothing recorded the id: the whole push under it is applied.
  absl::StatusOr<PushResult> retry = shards.cluster().Push(g, base.versions, v1::DTYPE_FP32, "cut-1");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_FALSE(retry->duplicate);
  EXPECT_EQ(retry->global_step, 1u);
}

// Announce sends the header before any gradient: a client that dies while
// it computes (its stream cut off) stops counting as a live pusher at once,
// where without it the shards would hear nothing until its silence ran out
// (10 s after a single push). An announced push that finishes is applied.
TEST_F(GradientStreamTest, AnAnnouncedStreamThatBreaksStopsItsClientCounting) {
  TwoShards shards(layout_);
  const std::vector<float> g = Gradient();
  const WeightSnapshot base = shards.PullAll();
  const PartitionMap& map = shards.cluster().partition_map();
  auto live = [&shards] {
    absl::StatusOr<std::vector<v1::StatsResponse>> stats = shards.cluster().Stats();
    if (!stats.ok()) {
      ADD_FAILURE() << stats.status();
      return std::numeric_limits<uint32_t>::max();  // Neither count the test waits for.
    }
    uint32_t n = 0;
    for (const v1::StatsResponse& s : *stats) n += s.live_pushers();
    return n;
  };
  ASSERT_TRUE(shards.cluster().Push(g, base.versions, v1::DTYPE_FP32, "counted-1").ok());
  ASSERT_EQ(live(), static_cast<uint32_t>(kShards));

  // Cancelled without Announce: the shards never heard of it.
  auto silent = shards.cluster().StartPush(shards.PullAll().versions, v1::DTYPE_FP32, "quiet-1");
  ASSERT_TRUE(silent.ok());
  silent->reset();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(live(), static_cast<uint32_t>(kShards));

  // Nothing tells the client when its headers reached the shards; a stream
  // cut before they did was never announced, so a loaded host gets a few
  // tries, each waiting longer before the cut.
  for (int attempt = 1; attempt <= 4 && live() != 0; ++attempt) {
    auto announced = shards.cluster().StartPush(shards.PullAll().versions, v1::DTYPE_FP32,
                                                absl::StrCat("cut-", attempt + 1));
    ASSERT_TRUE(announced.ok());
    (*announced)->Announce();
    absl::SleepFor(absl::Milliseconds(200) * attempt);  // The headers reach the shards.
    announced->reset();                                 // The process "dies": its streams break.
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (live() != 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(live(), 0u);

  const WeightSnapshot now = shards.PullAll();
  auto whole = shards.cluster().StartPush(now.versions, v1::DTYPE_FP32, "whole-1");
  ASSERT_TRUE(whole.ok());
  (*whole)->Announce();
  for (uint32_t id : ShuffledPartitions(shards.cluster(), 5)) {
    (*whole)->Send(id, g.data() + map.partitions()[id].flat_begin);
  }
  absl::StatusOr<PushResult> applied = (*whole)->Finish(1.0f);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_FALSE(applied->duplicate);
  EXPECT_EQ(applied->global_step, 2u);
  EXPECT_EQ(live(), static_cast<uint32_t>(kShards));  // Counted again.
}

TEST_F(GradientStreamTest, APullWithMinVersionsWaitsForTheUpdate) {
  TwoShards shards(layout_);
  const std::vector<float> g = Gradient();
  const WeightSnapshot base = shards.PullAll();
  PullOptions options;
  for (uint64_t v : base.versions) options.min_versions.push_back(v + 1);
  std::atomic<int> arrived{0};
  options.on_partition = [&](uint32_t) { arrived += 1; };

  WeightSnapshot waited = base;
  absl::Status pulled;
  std::thread puller([&] { pulled = shards.cluster().Pull(v1::DTYPE_FP32, &waited, options); });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(arrived.load(), 0);  // Still waiting: no update yet.
  ASSERT_TRUE(shards.cluster().Push(g, base.versions, v1::DTYPE_FP32).ok());
  puller.join();
  ASSERT_TRUE(pulled.ok()) << pulled;
  EXPECT_EQ(arrived.load(), static_cast<int>(base.versions.size()));
  for (uint64_t v : waited.versions) EXPECT_EQ(v, 1u);
  EXPECT_EQ(waited.values, shards.PullAll().values);
  EXPECT_NE(waited.values, base.values);
}

TEST_F(GradientStreamTest, APullWhoseUpdateNeverComesGetsTheWeightsAfterABoundedWait) {
  TwoShards shards(layout_, /*average_wait_ms=*/100);
  const WeightSnapshot base = shards.PullAll();
  PullOptions options;
  for (uint64_t v : base.versions) options.min_versions.push_back(v + 1);
  WeightSnapshot w;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(shards.cluster().Pull(v1::DTYPE_FP32, &w, options).ok());
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(300));  // 2 x 100 ms + 100 ms.
  EXPECT_LT(waited, absl::Seconds(10));
  EXPECT_EQ(w.values, base.values);
  EXPECT_EQ(w.versions, base.versions);
}

// A trainer whose push was a duplicate (a re-issued unit another trainer
// had pushed) waits for an update that never comes. Were the shard to wait
// up to the call's deadline, every attempt would end DEADLINE_EXCEEDED and
// the retries would never end.
TEST_F(GradientStreamTest, AWaitingPullAnswersBeforeAShortDeadline) {
  TwoShards shards(layout_, /*average_wait_ms=*/1000);  // Waits up to 2.1 s.
  const WeightSnapshot base = shards.PullAll();
  ClusterOptions hurried;
  hurried.retry.deadline = absl::Milliseconds(800);
  hurried.retry.max_attempts = 1;
  auto cluster = Cluster::Connect(shards.addresses(), hurried);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->FetchLayout().ok());
  PullOptions options;
  for (uint64_t v : base.versions) options.min_versions.push_back(v + 1);
  WeightSnapshot w;
  const absl::Time start = absl::Now();
  absl::Status pulled = (*cluster)->Pull(v1::DTYPE_FP32, &w, options);
  ASSERT_TRUE(pulled.ok()) << pulled;
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(800));
  EXPECT_EQ(w.values, base.values);
  EXPECT_EQ(w.versions, base.versions);
}

}  // namespace
}  // namespace spotps
