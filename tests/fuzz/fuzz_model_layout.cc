// libFuzzer target: a layout arrives from the wire in every Init and is read
// back from every checkpoint. Any bytes must be refused or give a layout
// whose partition maps tile the flat space exactly, for any shard count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/model_layout.h"
#include "common/partition_map.h"
#include "spotps/v1/parameter_server.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  spotps::v1::ModelLayout proto;
  if (!proto.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  absl::StatusOr<spotps::ModelLayout> layout = spotps::ModelLayout::FromProto(proto);
  if (!layout.ok()) return 0;
  // What validated must round-trip and keep its fingerprint.
  absl::StatusOr<spotps::ModelLayout> again = spotps::ModelLayout::FromProto(layout->ToProto());
  if (!again.ok() || again->fingerprint() != layout->fingerprint()) std::abort();
  const uint32_t shards = 1 + data[0] % 16;
  absl::StatusOr<spotps::PartitionMap> map = spotps::PartitionMap::Create(*layout, shards);
  if (!map.ok()) return 0;
  int64_t next = 0;
  for (const spotps::Partition& p : map->partitions()) {
    if (p.flat_begin != next || p.num_elements <= 0 ||
        p.num_elements > spotps::PartitionMap::kMaxPartitionElements || p.shard >= shards) {
      std::abort();
    }
    next += p.num_elements;
  }
  if (next != layout->total_elements()) std::abort();
  return 0;
}
