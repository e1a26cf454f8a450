// PartitionMap: cuts a model's flat parameter space into partitions and
// assigns each to a shard. Every process computes the same map from
// (layout, num_shards), so no lookup service is needed.
#ifndef SPOTPS_COMMON_PARTITION_MAP_H_
#define SPOTPS_COMMON_PARTITION_MAP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_layout.h"

namespace spotps {

struct Partition {
  uint32_t id = 0;
  int64_t flat_begin = 0;    // First element in the flat parameter space.
  int64_t num_elements = 0;  // Partitions tile the flat space without gaps.
  uint32_t shard = 0;
};

// A run of elements of one partition: used to map a flat range (a named
// tensor, or the whole model) onto the partitions that hold it.
struct PartitionRange {
  uint32_t partition_id = 0;
  int64_t offset = 0;  // Elements into the partition.
  int64_t num_elements = 0;
  int64_t flat_begin = 0;  // Same first element, in flat coordinates.
};

// Owns the partitions of one (layout, num_shards). Promises: partitions are
// contiguous ranges of at most kMaxPartitionElements (4 MiB of FP32), so big
// tensors are split and small ones grouped; small models still get several
// partitions per shard; shards are balanced by elements (largest-first onto
// the least-loaded shard, ties to the lower index), and the result is a pure
// function of the inputs.
class PartitionMap {
 public:
  static constexpr int64_t kMaxPartitionElements = int64_t{1} << 20;
  static constexpr int64_t kMinPartitionElements = int64_t{1} << 14;
  static constexpr int kTargetPartitionsPerShard = 4;
  static constexpr uint32_t kMaxShards = 1024;

  PartitionMap() = default;

  static absl::StatusOr<PartitionMap> Create(const ModelLayout& layout, uint32_t num_shards);

  uint32_t num_shards() const { return num_shards_; }
  const std::vector<Partition>& partitions() const { return partitions_; }
  const Partition* Find(uint32_t partition_id) const;

  // Partition ids owned by `shard`, ascending.
  const std::vector<uint32_t>& PartitionsOfShard(uint32_t shard) const;
  int64_t ShardElements(uint32_t shard) const;

  // Splits the flat range [flat_begin, flat_begin + n) at partition borders.
  std::vector<PartitionRange> Cover(int64_t flat_begin, int64_t n) const;

 private:
  uint32_t num_shards_ = 0;
  int64_t partition_elements_ = 0;
  std::vector<Partition> partitions_;
  std::vector<std::vector<uint32_t>> by_shard_;
  std::vector<int64_t> shard_elements_;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_PARTITION_MAP_H_
