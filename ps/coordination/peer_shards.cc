#include "ps/coordination/peer_shards.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace spotps {

PeerShards::PeerShards(const std::vector<std::string>& addresses, const ChannelSecurity& security) {
  for (const std::string& address : addresses) {
    peers_.push_back(Peer{address, v1::ParameterServer::NewStub(CreateSecureChannel(
                                       address, security, grpc::ChannelArguments()))});
  }
}

std::vector<absl::Status> PeerShards::CallAll(
    const RetryPolicy& policy, absl::string_view what,
    const std::function<grpc::Status(size_t, grpc::ClientContext*)>& call) {
  return pool_.RunAll(peers_.size(), [&](size_t i) {
    return CallWithRetry(policy, absl::StrCat("shard ", i + 1, " (", peers_[i].address, ") ", what),
                         [&](grpc::ClientContext* ctx) { return call(i, ctx); });
  });
}

}  // namespace spotps
