#include "common/partition_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace spotps {
namespace {

ModelLayout RandomLayout(std::mt19937& rng, int tensors, int64_t max_elements) {
  std::uniform_int_distribution<int64_t> size(1, max_elements);
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs;
  for (int i = 0; i < tensors; ++i) specs.push_back({"t" + std::to_string(i), {size(rng)}});
  return *ModelLayout::Create(std::move(specs));
}

// The properties every (layout, num_shards) must have.
void CheckInvariants(const ModelLayout& layout, const PartitionMap& map) {
  int64_t next = 0;
  for (const Partition& p : map.partitions()) {
    EXPECT_EQ(p.flat_begin, next) << "gap or overlap before partition " << p.id;
    EXPECT_GT(p.num_elements, 0);
    EXPECT_LE(p.num_elements, PartitionMap::kMaxPartitionElements);
    EXPECT_LT(p.shard, map.num_shards());
    next += p.num_elements;
  }
  EXPECT_EQ(next, layout.total_elements());
  int64_t lo = INT64_MAX, hi = 0, sum = 0;
  for (uint32_t s = 0; s < map.num_shards(); ++s) {
    int64_t owned = 0;
    for (uint32_t id : map.PartitionsOfShard(s)) {
      EXPECT_EQ(map.partitions()[id].shard, s);
      owned += map.partitions()[id].num_elements;
    }
    EXPECT_EQ(owned, map.ShardElements(s));
    lo = std::min(lo, owned);
    hi = std::max(hi, owned);
    sum += owned;
  }
  EXPECT_EQ(sum, layout.total_elements());
  int64_t biggest = 0;
  for (const Partition& p : map.partitions()) biggest = std::max(biggest, p.num_elements);
  // Largest-first greedy keeps shards within one partition of each other.
  EXPECT_LE(hi - lo, biggest);
}

TEST(PartitionMapTest, InvariantsHoldForRandomLayouts) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const ModelLayout layout = RandomLayout(rng, 1 + trial % 17, 3'000'000);
    for (uint32_t shards : {1u, 2u, 3u, 8u}) {
      auto map = PartitionMap::Create(layout, shards);
      ASSERT_TRUE(map.ok()) << map.status();
      CheckInvariants(layout, *map);
    }
  }
}

TEST(PartitionMapTest, IsAPureFunctionOfLayoutAndShards) {
  std::mt19937 rng(11);
  const ModelLayout layout = RandomLayout(rng, 9, 2'000'000);
  auto a = PartitionMap::Create(layout, 3);
  auto b = PartitionMap::Create(layout, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->partitions().size(), b->partitions().size());
  for (size_t i = 0; i < a->partitions().size(); ++i) {
    EXPECT_EQ(a->partitions()[i].flat_begin, b->partitions()[i].flat_begin);
    EXPECT_EQ(a->partitions()[i].shard, b->partitions()[i].shard);
  }
}

TEST(PartitionMapTest, SplitsBigTensorsAndGroupsSmallOnes) {
  auto layout = ModelLayout::Create(
      {{"big", {9 * PartitionMap::kMaxPartitionElements + 5}}, {"b1", {10}}, {"b2", {10}}});
  ASSERT_TRUE(layout.ok());
  auto map = PartitionMap::Create(*layout, 2);
  ASSERT_TRUE(map.ok());
  // big in 10 pieces of at most 4 MiB; b1 and b2 ride in the last one.
  EXPECT_EQ(map->partitions().size(), 10u);
  const auto cover =
      map->Cover(layout->Find("big")->flat_offset, layout->Find("big")->num_elements);
  EXPECT_EQ(cover.size(), 10u);
  const auto small = map->Cover(layout->Find("b1")->flat_offset, 20);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0].partition_id, 9u);
}

TEST(PartitionMapTest, SmallModelsStillSpreadOverEveryShard) {
  auto layout = ModelLayout::Create({{"w", {1'000'000}}});
  ASSERT_TRUE(layout.ok());
  auto map = PartitionMap::Create(*layout, 2);
  ASSERT_TRUE(map.ok());
  EXPECT_GE(map->PartitionsOfShard(0).size(), 2u);
  EXPECT_GE(map->PartitionsOfShard(1).size(), 2u);
}

TEST(PartitionMapTest, CoverSplitsAtPartitionBorders) {
  auto layout = ModelLayout::Create({{"w", {200'000}}});
  auto map = PartitionMap::Create(*layout, 2);
  ASSERT_TRUE(map.ok());
  const int64_t begin = 12'345, n = 150'000;
  int64_t pos = begin;
  for (const PartitionRange& r : map->Cover(begin, n)) {
    const Partition& p = map->partitions()[r.partition_id];
    EXPECT_EQ(r.flat_begin, pos);
    EXPECT_EQ(p.flat_begin + r.offset, pos);
    EXPECT_LE(r.offset + r.num_elements, p.num_elements);
    pos += r.num_elements;
  }
  EXPECT_EQ(pos, begin + n);
}

TEST(PartitionMapTest, RejectsBadShardCounts) {
  auto layout = ModelLayout::Create({{"w", {10}}});
  EXPECT_FALSE(PartitionMap::Create(*layout, 0).ok());
  EXPECT_FALSE(PartitionMap::Create(*layout, PartitionMap::kMaxShards + 1).ok());
}

}  // namespace
}  // namespace spotps
