// libFuzzer target: a push request as a hostile client would send it, parsed
// from bytes and handed to a real ShardStore the way the service does. The
// store must refuse or apply it whole: after a refusal nothing changed, and
// no weight is ever left non-finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ps/store/shard_store.h"
#include "spotps/v1/parameter_server.pb.h"

namespace {

// One AdamW shard of a small two-tensor model, initialised once.
spotps::ShardStore& Store() {
  static spotps::ShardStore* store = [] {
    spotps::ShardOptions options;
    options.shard_index = 0;
    options.num_shards = 1;
    options.optimizer.kind = spotps::OptimizerKind::kAdamW;
    options.schedule.base_lr = 1e-2;
    auto created = spotps::ShardStore::Create(options);
    if (!created.ok()) std::abort();
    auto layout = spotps::ModelLayout::Create({{"w", {128, 40}}, {"b", {40}}});
    const spotps::PartitionMap map = *spotps::PartitionMap::Create(*layout, 1);
    static std::vector<std::string> init_bytes;
    std::vector<spotps::PayloadRange> init;
    for (const spotps::Partition& p : map.partitions()) {
      init_bytes.emplace_back(p.num_elements * sizeof(float), '\0');
    }
    for (size_t i = 0; i < map.partitions().size(); ++i) {
      init.push_back(spotps::PayloadRange{map.partitions()[i].id, 0, init_bytes[i], 0});
    }
    if (!(*created)->Init(*layout, init).ok()) std::abort();
    return created->release();
  }();
  return *store;
}

bool AllFinite(const spotps::ShardState& state) {
  for (const spotps::PartitionSnapshot& p : state.partitions) {
    for (float w : p.weights) {
      if (!std::isfinite(w)) return false;
    }
    for (const auto& slot : p.optimizer_state) {
      for (float v : slot) {
        if (!std::isfinite(v)) return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spotps::v1::PushRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  spotps::ShardStore& store = Store();
  std::vector<spotps::PayloadRange> ranges;
  for (const spotps::v1::PartitionChunk& c : request.chunks()) {
    ranges.push_back(spotps::PayloadRange{c.partition_id(), c.offset(), c.data(), c.version()});
  }
  spotps::AnnouncedElements announced;
  for (const spotps::v1::PartitionCount& a : request.announced()) {
    // The service refuses a partition announced twice before the store.
    if (!announced.emplace(a.partition_id(), a.num_elements()).second) return 0;
  }
  const spotps::ShardState before = *store.ExportState();
  absl::StatusOr<spotps::PushOutcome> outcome =
      store.Push(request.push_id(), request.dtype(), ranges, &announced);
  const spotps::ShardState after = *store.ExportState();
  if (!AllFinite(after)) std::abort();
  if (!outcome.ok() || outcome->duplicate) {
    for (size_t i = 0; i < before.partitions.size(); ++i) {
      if (before.partitions[i].version != after.partitions[i].version ||
          before.partitions[i].weights != after.partitions[i].weights) {
        std::abort();
      }
    }
  }
  return 0;
}
