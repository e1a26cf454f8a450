#include "client/shard_connection.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace spotps {

v1::PushRequest PushHeader(const std::string& push_id, v1::DType dtype,
                           const std::string& worker_id,
                           const std::map<uint32_t, int64_t>& announced) {
  v1::PushRequest header;
  header.set_push_id(push_id);
  header.set_dtype(dtype);
  header.set_worker_id(worker_id);
  for (const auto& [id, n] : announced) {
    v1::PartitionCount* count = header.add_announced();
    count->set_partition_id(id);
    count->set_num_elements(static_cast<uint64_t>(n));
  }
  return header;
}

absl::StatusOr<PushResult> CombinePushReplies(const std::vector<ShardPushReply>& replies,
                                              size_t num_partitions) {
  PushResult result;
  result.duplicate = true;
  result.versions.assign(num_partitions, kNoVersion);
  int deferring = 0, contacted = 0;
  for (const ShardPushReply& shard : replies) {
    if (!shard.contacted) continue;
    const v1::PushResponse& r = shard.reply;
    contacted += 1;
    deferring += r.deferred() ? 1 : 0;
    result.duplicate = result.duplicate && r.duplicate();
    result.deferred = result.deferred || r.deferred();
    result.compute_on_fresh_weights =
        result.compute_on_fresh_weights || r.compute_on_fresh_weights();
    result.global_step = std::max(result.global_step, r.global_step());
    for (uint64_t st : r.staleness()) result.max_staleness = std::max(result.max_staleness, st);
    if (!r.deferred() && r.partition_ids_size() == r.new_versions_size()) {
      for (int k = 0; k < r.partition_ids_size(); ++k) {
        if (r.partition_ids(k) >= num_partitions) continue;
        result.versions[r.partition_ids(k)] = r.new_versions(k);
      }
    }
    result.bytes_sent += shard.bytes;
  }
  if (deferring != 0 && deferring != contacted) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "Push: %d of %d shards run --consistency=sync and held the gradient, the others applied "
        "it: give every shard the same --consistency",
        deferring, contacted));
  }
  return result;
}

}  // namespace spotps
