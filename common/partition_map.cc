#include "common/partition_map.h"

#include <algorithm>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace spotps {
namespace {

// Aims for kTargetPartitionsPerShard partitions on each shard, so that small
// models still spread over every shard, within [min, max] elements.
int64_t ChoosePartitionElements(int64_t total, uint32_t num_shards) {
  const int64_t want = num_shards * int64_t{PartitionMap::kTargetPartitionsPerShard};
  const int64_t size = (total + want - 1) / want;
  return std::clamp(size, PartitionMap::kMinPartitionElements, PartitionMap::kMaxPartitionElements);
}

}  // namespace

absl::StatusOr<PartitionMap> PartitionMap::Create(const ModelLayout& layout, uint32_t num_shards) {
  if (num_shards == 0 || num_shards > kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_shards must be in [1, %d], got %d", kMaxShards, num_shards));
  }
  if (layout.empty()) return absl::InvalidArgumentError("layout has no tensors");

  PartitionMap map;
  map.num_shards_ = num_shards;
  map.partition_elements_ = ChoosePartitionElements(layout.total_elements(), num_shards);
  for (int64_t begin = 0; begin < layout.total_elements(); begin += map.partition_elements_) {
    Partition p;
    p.id = static_cast<uint32_t>(map.partitions_.size());
    p.flat_begin = begin;
    p.num_elements = std::min(map.partition_elements_, layout.total_elements() - begin);
    map.partitions_.push_back(p);
  }

  // Largest first onto the least-loaded shard.
  std::vector<uint32_t> order(map.partitions_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return map.partitions_[a].num_elements > map.partitions_[b].num_elements;
  });
  map.shard_elements_.assign(num_shards, 0);
  map.by_shard_.assign(num_shards, {});
  for (uint32_t id : order) {
    const auto lightest = std::min_element(map.shard_elements_.begin(), map.shard_elements_.end());
    const uint32_t shard = static_cast<uint32_t>(lightest - map.shard_elements_.begin());
    map.partitions_[id].shard = shard;
    map.shard_elements_[shard] += map.partitions_[id].num_elements;
    map.by_shard_[shard].push_back(id);
  }
  for (auto& ids : map.by_shard_) std::sort(ids.begin(), ids.end());
  return map;
}

const Partition* PartitionMap::Find(uint32_t partition_id) const {
  return partition_id < partitions_.size() ? &partitions_[partition_id] : nullptr;
}

const std::vector<uint32_t>& PartitionMap::PartitionsOfShard(uint32_t shard) const {
  static const std::vector<uint32_t> kNone;
  return shard < by_shard_.size() ? by_shard_[shard] : kNone;
}

int64_t PartitionMap::ShardElements(uint32_t shard) const {
  return shard < shard_elements_.size() ? shard_elements_[shard] : 0;
}

std::vector<PartitionRange> PartitionMap::Cover(int64_t flat_begin, int64_t n) const {
  std::vector<PartitionRange> ranges;
  if (partition_elements_ == 0 || n <= 0) return ranges;
  const int64_t end = flat_begin + n;
  for (int64_t pos = flat_begin; pos < end;) {
    const int64_t id = pos / partition_elements_;
    if (id >= static_cast<int64_t>(partitions_.size())) break;
    const Partition& p = partitions_[id];
    const int64_t stop = std::min(end, p.flat_begin + p.num_elements);
    ranges.push_back(PartitionRange{p.id, pos - p.flat_begin, stop - pos, pos});
    pos = stop;
  }
  return ranges;
}

}  // namespace spotps
