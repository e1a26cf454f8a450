// gRPC channel settings for bulk tensor traffic, shared by clients and
// shards so both ends of a connection agree.
#ifndef SPOTPS_COMMON_TRANSPORT_ARGS_H_
#define SPOTPS_COMMON_TRANSPORT_ARGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spotps {

// Every Init or Push stream message but the last carries at least this much
// payload (protos/spotps/v1/parameter_server.proto), so that a shard can
// bound a stream's message and chunk counts by the payload it may carry.
inline constexpr int64_t kMinStreamMessageBytes = int64_t{64} << 10;

// (name, value) pairs for grpc::ChannelArguments::SetInt and
// grpc::ServerBuilder::AddChannelArgument.
std::vector<std::pair<std::string, int>> BulkTransportArgs();

// Makes glibc keep freed multi-MiB buffers for reuse instead of returning
// them to the kernel: otherwise every received 4 MiB message is a fresh mmap
// whose pages the kernel must fault in and zero, which costs more than the
// transfer itself. A trainer's step gains as much: it frees nearly all it
// allocated, and with glibc's defaults the next step faulted it all in again
// (`small`, batch 16 x 256, 1 thread, on a paravirtualized host: 2,330
// tokens/s untuned, 3,640 tuned). Process-wide; spotps binaries call it
// first thing, and a service linking the client library should too.
void TuneAllocatorForBulkTransfers();

}  // namespace spotps

#endif  // SPOTPS_COMMON_TRANSPORT_ARGS_H_
