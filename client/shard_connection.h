// ShardConnection: the client's connections to one shard, and the parts of a
// push that Cluster::Push and the streamed push (GradientStream) share: the
// first message's header and the combining of the shards' answers.
// Internal to the client library (not installed).
#ifndef SPOTPS_CLIENT_SHARD_CONNECTION_H_
#define SPOTPS_CLIENT_SHARD_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cluster.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

struct ShardConnection {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ParameterServer::Stub> stub;
  // Extra connections for parallel pull streams (see pull_streams_per_shard).
  std::vector<std::shared_ptr<grpc::Channel>> pull_channels;
  // Pull and Push travel as raw messages (common/chunk_frame.h), so that
  // payloads skip protobuf's copies; these name them on the channels above.
  grpc::internal::RpcMethod pull_method{"/spotps.v1.ParameterServer/Pull",
                                        grpc::internal::RpcMethod::SERVER_STREAMING};
  grpc::internal::RpcMethod push_method{"/spotps.v1.ParameterServer/Push",
                                        grpc::internal::RpcMethod::CLIENT_STREAMING};
};

// A push stream's first message, every field but the chunks: the shard
// applies the push only if the stream carries exactly `announced` (elements
// per partition id). `worker_id` lets every shard count the workers that
// push to it ("avg"'s k).
v1::PushRequest PushHeader(const std::string& push_id, v1::DType dtype,
                           const std::string& worker_id,
                           const std::map<uint32_t, int64_t>& announced);

// One shard's answer to a push: `contacted` false for a shard the push did
// not concern; `bytes` the payload bytes sent to it.
struct ShardPushReply {
  bool contacted = false;
  v1::PushResponse reply;
  int64_t bytes = 0;
};
// The push's outcome over every shard: duplicate only if every contacted
// shard said so, the highest staleness and global step. FAILED_PRECONDITION
// when some shards held the gradient for a sync round and others applied it.
// `num_partitions` sizes PushResult::versions.
absl::StatusOr<PushResult> CombinePushReplies(const std::vector<ShardPushReply>& replies,
                                              size_t num_partitions);

}  // namespace spotps

#endif  // SPOTPS_CLIENT_SHARD_CONNECTION_H_
