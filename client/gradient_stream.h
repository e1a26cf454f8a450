// The client's GradientStream (client/cluster.h): one push stream per shard,
// fed partition by partition. Internal to the client library.
#ifndef SPOTPS_CLIENT_GRADIENT_STREAM_H_
#define SPOTPS_CLIENT_GRADIENT_STREAM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "client/cluster.h"
#include "client/shard_connection.h"
#include "common/partition_map.h"
#include "common/retry_policy.h"

namespace spotps {

struct GradientStreamOptions {
  std::string push_id;
  std::string worker_id;
  v1::DType dtype = v1::DTYPE_BF16;
  absl::Duration deadline = absl::Seconds(60);  // For the whole push.
  int64_t message_bytes = int64_t{4} << 20;     // Payload per message at most.
};

// Opens a stream to every shard in `shards` (in shard-index order) that owns
// partitions of `map`, announcing all of them. Borrows shards and map, which
// must outlive the stream. Contacts nobody before the first message.
std::unique_ptr<GradientStream> OpenGradientStream(const std::vector<ShardConnection*>& shards,
                                                   const PartitionMap& map,
                                                   absl::Span<const uint64_t> base_versions,
                                                   const GradientStreamOptions& options);

}  // namespace spotps

#endif  // SPOTPS_CLIENT_GRADIENT_STREAM_H_
