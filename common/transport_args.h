// gRPC channel settings for bulk tensor traffic, shared by clients and
// shards so both ends of a connection agree.
#ifndef SPOTPS_COMMON_TRANSPORT_ARGS_H_
#define SPOTPS_COMMON_TRANSPORT_ARGS_H_

#include <string>
#include <utility>
#include <vector>

namespace spotps {

// (name, value) pairs for grpc::ChannelArguments::SetInt and
// grpc::ServerBuilder::AddChannelArgument.
std::vector<std::pair<std::string, int>> BulkTransportArgs();

// Makes glibc keep freed multi-MiB buffers for reuse instead of returning
// them to the kernel: otherwise every received 4 MiB message is a fresh mmap
// whose pages the kernel must fault in and zero, which costs more than the
// transfer itself. Process-wide; spotps binaries call it first thing, and a
// service linking the client library should too.
void TuneAllocatorForBulkTransfers();

}  // namespace spotps

#endif  // SPOTPS_COMMON_TRANSPORT_ARGS_H_
