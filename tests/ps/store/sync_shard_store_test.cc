// A shard in sync mode: pushes are held for the open round and a round
// applies the mean of exactly the pushes it names, once, whatever order
// they arrived in; hostile pushes and rounds change nothing.
#include <gtest/gtest.h>

#include <random>

#include "common/tensor_codec.h"
#include "ps/store/shard_store.h"

namespace spotps {
namespace {

// Owns encoded payloads so PayloadRange views stay valid.
struct Payload {
  std::vector<std::string> bytes;
  std::vector<PayloadRange> ranges;
};

class SyncShardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = Make(/*sync=*/true); }

  std::unique_ptr<ShardStore> Make(bool sync, size_t capacity = 8) {
    ShardOptions o;
    o.optimizer.kind = OptimizerKind::kSgd;
    o.schedule.base_lr = 0.5;
    o.sync_rounds = sync;
    o.max_round_contributions = capacity;
    auto store = ShardStore::Create(o);
    EXPECT_TRUE(store.ok()) << store.status();
    Payload init = Whole(
        v1::DTYPE_FP32, [](int64_t i) { return float(i % 13); }, 0);
    EXPECT_TRUE((*store)->Init(layout_, init.ranges).ok());
    return *std::move(store);
  }

  // One range per partition (a 1-shard map), element i = value(i), based on `version`.
  template <typename Fn>
  Payload Whole(v1::DType dtype, Fn value, uint64_t version) const {
    Payload p;
    p.bytes.reserve(map_.partitions().size());
    for (const Partition& part : map_.partitions()) {
      std::vector<float> v(part.num_elements);
      for (int64_t i = 0; i < part.num_elements; ++i) v[i] = value(part.flat_begin + i);
      p.bytes.emplace_back();
      AppendEncoded(v.data(), v.size(), dtype, &p.bytes.back());
      p.ranges.push_back(PayloadRange{part.id, 0, p.bytes.back(), version});
    }
    return p;
  }

  static std::vector<float> ReadAll(const ShardStore& store) {
    std::vector<float> out(store.layout().total_elements());
    for (uint32_t id : store.owned_partitions()) {
      std::string bytes;
      EXPECT_TRUE(store.Read(id, v1::DTYPE_FP32, &bytes).ok());
      const Partition& p = store.partition_map().partitions()[id];
      EXPECT_TRUE(
          DecodeToFp32(v1::DTYPE_FP32, bytes, p.num_elements, out.data() + p.flat_begin).ok());
    }
    return out;
  }

  const ModelLayout layout_ = *ModelLayout::Create({{"w", {3, 1'000'000}}, {"b", {33}}});
  const PartitionMap map_ = *PartitionMap::Create(layout_, 1);
  std::unique_ptr<ShardStore> store_;
};

TEST_F(SyncShardStoreTest, ARoundAppliesTheMeanOfExactlyTheNamedPushesOnce) {
  ASSERT_GT(map_.partitions().size(), 2u);
  const std::vector<float> w0 = ReadAll(*store_);
  auto g = [](float k) { return [k](int64_t i) { return k * float(i % 5); }; };
  for (const auto& [id, k] :
       std::vector<std::pair<std::string, float>>{{"a", 1}, {"b", 64}, {"c", 3}}) {
    Payload p = Whole(v1::DTYPE_BF16, g(k), 0);
    auto held = store_->Push(id, v1::DTYPE_BF16, p.ranges);
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_TRUE(held->deferred);
    EXPECT_EQ(held->new_versions, std::vector<uint64_t>(map_.partitions().size(), 0));
  }
  EXPECT_EQ(ReadAll(*store_), w0);  // Held, not applied.
  auto round = store_->ApplyRound({"c", "a"});
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_FALSE(round->already_applied);
  EXPECT_EQ(round->global_step, 1u);
  const std::vector<float> w1 = ReadAll(*store_);
  for (size_t i = 0; i < w1.size(); ++i) {
    // w0 - lr * mean(g_a, g_c), exact in binary floating point.
    ASSERT_EQ(w1[i], w0[i] - 0.5f * (float(i % 5) * 4.0f / 2.0f)) << i;
  }
  for (uint32_t id = 0; id < map_.partitions().size(); ++id) EXPECT_EQ(*store_->Version(id), 1u);
  // The retried round is recognised; the push it left out ("b") is gone.
  EXPECT_TRUE(store_->ApplyRound({"a", "c"})->already_applied);
  EXPECT_EQ(store_->ApplyRound({"b"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadAll(*store_), w1);
  v1::StatsResponse stats;
  store_->FillStats(&stats);
  EXPECT_TRUE(stats.sync());
  EXPECT_EQ(stats.pushes_applied(), 2u);
  EXPECT_EQ(stats.round_contributions(), 0u);
}

TEST_F(SyncShardStoreTest, ArrivalOrderDoesNotChangeTheResult) {
  std::vector<Payload> grads;
  for (int k = 0; k < 5; ++k) {
    std::mt19937 rng(k);
    std::normal_distribution<float> n(0.0f, 1.0f);
    grads.push_back(Whole(
        k % 2 ? v1::DTYPE_BF16 : v1::DTYPE_FP32, [&](int64_t) { return n(rng); }, 0));
  }
  std::unique_ptr<ShardStore> other = Make(true);
  const std::vector<std::string> ids = {"p0", "p1", "p2", "p3", "p4"};
  for (int k = 0; k < 5; ++k) {
    ASSERT_TRUE(
        store_->Push(ids[k], k % 2 ? v1::DTYPE_BF16 : v1::DTYPE_FP32, grads[k].ranges).ok());
  }
  for (int k = 4; k >= 0; --k) {
    ASSERT_TRUE(other->Push(ids[k], k % 2 ? v1::DTYPE_BF16 : v1::DTYPE_FP32, grads[k].ranges).ok());
  }
  ASSERT_TRUE(store_->ApplyRound(ids).ok());
  ASSERT_TRUE(other->ApplyRound({"p3", "p0", "p4", "p2", "p1"}).ok());
  EXPECT_EQ(ReadAll(*store_), ReadAll(*other));  // Bit for bit.
}

TEST_F(SyncShardStoreTest, HostilePushesAndRoundsChangeNothing) {
  auto one = [](int64_t) { return 1.0f; };
  Payload held = Whole(v1::DTYPE_FP32, one, 0);
  ASSERT_TRUE(store_->Push("held", v1::DTYPE_FP32, held.ranges).ok());
  const std::vector<float> w0 = ReadAll(*store_);
  auto code = [](const absl::Status& s) { return s.code(); };

  Payload partial = Whole(v1::DTYPE_FP32, one, 0);
  partial.ranges.pop_back();  // A round averages whole gradients.
  EXPECT_EQ(code(store_->Push("partial", v1::DTYPE_FP32, partial.ranges).status()),
            absl::StatusCode::kInvalidArgument);
  Payload future = Whole(v1::DTYPE_FP32, one, 1);
  EXPECT_EQ(code(store_->Push("future", v1::DTYPE_FP32, future.ranges).status()),
            absl::StatusCode::kOutOfRange);
  Payload again = Whole(
      v1::DTYPE_FP32, [](int64_t) { return 5.0f; }, 0);
  EXPECT_TRUE(store_->Push("held", v1::DTYPE_FP32, again.ranges)->duplicate);  // First kept.

  EXPECT_EQ(code(store_->ApplyRound({}).status()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store_->ApplyRound({"held", "held"}).status()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store_->ApplyRound({"held", ""}).status()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store_->ApplyRound({std::string(200, 'x')}).status()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store_->ApplyRound(std::vector<std::string>(9, "x")).status()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store_->ApplyRound({"held", "never-pushed"}).status()),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadAll(*store_), w0);

  // Capacity: 8 held at most.
  for (int k = 1; k < 8; ++k) {
    ASSERT_TRUE(store_->Push("more" + std::to_string(k), v1::DTYPE_FP32, held.ranges).ok());
  }
  EXPECT_EQ(code(store_->Push("ninth", v1::DTYPE_FP32, held.ranges).status()),
            absl::StatusCode::kResourceExhausted);

  // After a round, a gradient of the old version is refused.
  ASSERT_TRUE(store_->ApplyRound({"held"}).ok());
  EXPECT_EQ(code(store_->Push("stale", v1::DTYPE_FP32, held.ranges).status()),
            absl::StatusCode::kAborted);
  Payload current = Whole(v1::DTYPE_FP32, one, 1);
  EXPECT_TRUE(store_->Push("fresh", v1::DTYPE_FP32, current.ranges).ok());
}

TEST_F(SyncShardStoreTest, AnAsyncShardRefusesRounds) {
  std::unique_ptr<ShardStore> async = Make(false);
  Payload g = Whole(
      v1::DTYPE_FP32, [](int64_t) { return 1.0f; }, 0);
  auto pushed = async->Push("x", v1::DTYPE_FP32, g.ranges);
  ASSERT_TRUE(pushed.ok());
  EXPECT_FALSE(pushed->deferred);
  EXPECT_EQ(async->ApplyRound({"x"}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace spotps
