#include "ps/store/shard_store.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/tensor_codec.h"

namespace spotps {
namespace {

// Owns encoded payloads so PayloadRange views stay valid.
struct Payload {
  std::vector<std::string> bytes;
  std::vector<PayloadRange> ranges;
};

ModelLayout TestLayout() { return *ModelLayout::Create({{"w", {100'000}}, {"b", {77}}}); }

ShardOptions SgdOptions(double lr) {
  ShardOptions o;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.schedule.base_lr = lr;
  return o;
}

// One range per owned partition, every element `value(flat_index)`.
template <typename Fn>
Payload WholeShard(const ShardStore& store, const PartitionMap& map, v1::DType dtype, Fn value,
                   uint64_t version = 0) {
  Payload p;
  const auto& ids = map.PartitionsOfShard(store.options().shard_index);
  p.bytes.reserve(ids.size());
  for (uint32_t id : ids) {
    const Partition& part = map.partitions()[id];
    std::vector<float> v(part.num_elements);
    for (int64_t i = 0; i < part.num_elements; ++i) v[i] = value(part.flat_begin + i);
    p.bytes.emplace_back();
    AppendEncoded(v.data(), v.size(), dtype, &p.bytes.back());
    p.ranges.push_back(PayloadRange{id, 0, p.bytes.back(), version});
  }
  return p;
}

std::vector<float> ReadAll(const ShardStore& store) {
  std::vector<float> out(store.layout().total_elements(), 0.0f);
  for (uint32_t id : store.owned_partitions()) {
    std::string bytes;
    EXPECT_TRUE(store.Read(id, v1::DTYPE_FP32, &bytes).ok());
    const Partition& p = store.partition_map().partitions()[id];
    EXPECT_TRUE(
        DecodeToFp32(v1::DTYPE_FP32, bytes, p.num_elements, out.data() + p.flat_begin).ok());
  }
  return out;
}

class ShardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *ShardStore::Create(SgdOptions(0.5));
    map_ = *PartitionMap::Create(layout_, 1);
  }
  void InitWith(float base) {
    Payload init =
        WholeShard(*store_, map_, v1::DTYPE_FP32, [&](int64_t i) { return base + i % 7; });
    ASSERT_TRUE(*store_->Init(layout_, init.ranges));
  }
  ModelLayout layout_ = TestLayout();
  PartitionMap map_;
  std::unique_ptr<ShardStore> store_;
};

TEST_F(ShardStoreTest, RacingInitsFirstWinsAndIdenticalLayoutsSucceed) {
  constexpr int kRacers = 8;
  std::vector<Payload> payloads;
  for (int r = 0; r < kRacers; ++r) {
    payloads.push_back(
        WholeShard(*store_, map_, v1::DTYPE_FP32, [r](int64_t) { return float(r); }));
  }
  std::vector<int> applied(kRacers, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRacers; ++r) {
    threads.emplace_back([&, r] {
      auto result = store_->Init(layout_, payloads[r].ranges);
      applied[r] = result.ok() ? (*result ? 1 : 0) : -1;
    });
  }
  for (auto& t : threads) t.join();
  int winners = 0, winner = -1;
  for (int r = 0; r < kRacers; ++r) {
    EXPECT_NE(applied[r], -1) << "racer " << r << " failed";
    if (applied[r] == 1) {
      ++winners;
      winner = r;
    }
  }
  ASSERT_EQ(winners, 1);
  for (float v : ReadAll(*store_)) ASSERT_EQ(v, float(winner));
}

TEST_F(ShardStoreTest, DifferentLayoutIsRefusedAndChangesNothing) {
  InitWith(1.0f);
  const std::vector<float> before = ReadAll(*store_);
  const ModelLayout other = *ModelLayout::Create({{"w", {100'000}}, {"b", {78}}});
  const PartitionMap other_map = *PartitionMap::Create(other, 1);
  Payload p = WholeShard(*store_, other_map, v1::DTYPE_FP32, [](int64_t) { return 9.0f; });
  auto result = store_->Init(other, p.ranges);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("different model"), absl::string_view::npos);
  EXPECT_EQ(ReadAll(*store_), before);
}

TEST_F(ShardStoreTest, RetriedPushIdIsAppliedOnce) {
  InitWith(0.0f);
  const std::vector<float> before = ReadAll(*store_);
  Payload g = WholeShard(*store_, map_, v1::DTYPE_BF16, [](int64_t) { return 2.0f; });
  auto first = store_->Push("push-1", v1::DTYPE_BF16, g.ranges);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
  auto retry = store_->Push("push-1", v1::DTYPE_BF16, g.ranges);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->duplicate);
  const std::vector<float> after = ReadAll(*store_);
  for (size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], before[i] - 1.0f) << i;
  v1::StatsResponse stats;
  store_->FillStats(&stats);
  EXPECT_EQ(stats.pushes_applied(), 1u);
  EXPECT_EQ(stats.pushes_duplicate(), 1u);
  EXPECT_EQ(stats.global_step(), 1u);
}

TEST(ShardStoreStalenessTest, BoundRefusesAndScalingShrinksTheStep) {
  ShardOptions o = SgdOptions(1.0);
  o.max_staleness = 2;
  o.staleness_lr_scaling = true;
  auto store = *ShardStore::Create(o);
  const ModelLayout layout = TestLayout();
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  Payload init = WholeShard(*store, map, v1::DTYPE_FP32, [](int64_t) { return 0.0f; });
  ASSERT_TRUE(store->Init(layout, init.ranges).ok());
  Payload g0 = WholeShard(
      *store, map, v1::DTYPE_FP32, [](int64_t) { return 1.0f; }, 0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store->Push("fresh-" + std::to_string(i), v1::DTYPE_FP32, g0.ranges).ok());
    g0 = WholeShard(
        *store, map, v1::DTYPE_FP32, [](int64_t) { return 1.0f; }, i + 1);
  }
  // Weights are -3 at version 3. A push based on version 0 is 3 stale: refused.
  Payload stale = WholeShard(
      *store, map, v1::DTYPE_FP32, [](int64_t) { return 1.0f; }, 0);
  auto refused = store->Push("stale", v1::DTYPE_FP32, stale.ranges);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted) << refused.status();
  for (float v : ReadAll(*store)) ASSERT_EQ(v, -3.0f);
  // Based on version 1: staleness 2, lr scaled to 1/3; gradient 3 moves by 1.
  Payload ok = WholeShard(
      *store, map, v1::DTYPE_FP32, [](int64_t) { return 3.0f; }, 1);
  auto applied = store->Push("ok", v1::DTYPE_FP32, ok.ranges);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->staleness[0], 2u);
  for (float v : ReadAll(*store)) ASSERT_EQ(v, -4.0f);
  // Based on a version the partition never had.
  Payload future = WholeShard(
      *store, map, v1::DTYPE_FP32, [](int64_t) { return 1.0f; }, 99);
  EXPECT_EQ(store->Push("future", v1::DTYPE_FP32, future.ranges).status().code(),
            absl::StatusCode::kOutOfRange);
}

// Writers push gradients that are uniform over the model while readers check
// that every partition they read is uniformly shifted from its start: a torn
// read (half old, half new) would break that.
TEST_F(ShardStoreTest, ConcurrentPushesAreExactAndReadsAreNeverTorn) {
  InitWith(0.0f);
  const std::vector<float> w0 = ReadAll(*store_);
  constexpr int kWriters = 4, kPushesEach = 25;
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (uint32_t id : store_->owned_partitions()) {
        std::string bytes;
        ASSERT_TRUE(store_->Read(id, v1::DTYPE_FP32, &bytes).ok());
        const Partition& p = map_.partitions()[id];
        std::vector<float> v(p.num_elements);
        ASSERT_TRUE(DecodeToFp32(v1::DTYPE_FP32, bytes, p.num_elements, v.data()).ok());
        const float shift = w0[p.flat_begin] - v[0];
        for (int64_t i = 1; i < p.num_elements; ++i) {
          if (w0[p.flat_begin + i] - v[i] != shift) {
            torn++;
            break;
          }
        }
        reads++;
      }
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int k = 0; k < kPushesEach; ++k) {
        Payload g =
            WholeShard(*store_, map_, v1::DTYPE_BF16, [w](int64_t) { return float(w + 1); });
        // Each partition's own current version: versions only grow, so
        // none of them can be from the future when the push is validated.
        for (PayloadRange& r : g.ranges) r.version = *store_->Version(r.partition_id);
        ASSERT_TRUE(store_->Push(absl::StrCat("w", w, "-", k), v1::DTYPE_BF16, g.ranges).ok());
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_GT(reads.load(), 0);
  // lr 0.5 * sum over writers of (w+1) * 25 = 0.5 * 10 * 25.
  const std::vector<float> w = ReadAll(*store_);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], w0[i] - 125.0f) << i;
}

// The apply lanes change when a partition is updated, not how: pushes
// applied on arrival and averaged ("fresh") updates give the same bits on
// one thread and on several.
TEST(ShardStoreLanesTest, ParallelApplyGivesTheSameWeightsAsOneThread) {
  const ModelLayout layout = TestLayout();
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  ASSERT_GT(map.partitions().size(), 2u);  // Something to spread.
  for (bool fresh : {false, true}) {
    std::vector<std::vector<float>> results;
    for (size_t threads : {1, 4}) {
      ShardOptions o;
      o.optimizer.kind = OptimizerKind::kAdamW;
      o.schedule.base_lr = 1e-2;
      o.apply_threads = threads;
      if (fresh) {
        o.staleness.average = o.staleness.fresh = true;
        o.staleness.average_pushes = 2;
      }
      std::unique_ptr<ShardStore> store = *ShardStore::Create(o);
      Payload init =
          WholeShard(*store, map, v1::DTYPE_FP32, [](int64_t i) { return 0.01f * (i % 13); });
      ASSERT_TRUE(*store->Init(layout, init.ranges));
      for (int k = 0; k < 6; ++k) {
        Payload g = WholeShard(*store, map, v1::DTYPE_BF16, [k](int64_t i) {
          return 0.001f * static_cast<float>((i * (k + 3)) % 101 - 50);
        });
        for (PayloadRange& r : g.ranges) r.version = *store->Version(r.partition_id);
        ASSERT_TRUE(store->Push(absl::StrCat("p", k), v1::DTYPE_BF16, g.ranges).ok());
      }
      results.push_back(ReadAll(*store));
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    EXPECT_NE(results[0][5], 0.01f * 5) << "the pushes moved nothing";
    for (size_t i = 0; i < results[0].size(); ++i) {
      ASSERT_EQ(results[0][i], results[1][i]) << (fresh ? "fresh" : "async") << " element " << i;
    }
  }
}

}  // namespace
}  // namespace spotps
