#include "ps/peer_shards.h"

#include <grpcpp/grpcpp.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace spotps {

PeerShards::PeerShards(const std::vector<std::string>& addresses) {
  for (const std::string& address : addresses) {
    peers_.push_back(Peer{address, v1::ParameterServer::NewStub(grpc::CreateChannel(
                                       address, grpc::InsecureChannelCredentials()))});
  }
}

std::vector<absl::Status> PeerShards::CallAll(
    const RetryPolicy& policy, absl::string_view what,
    const std::function<grpc::Status(size_t, grpc::ClientContext*)>& call) {
  std::vector<absl::Status> results(peers_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < peers_.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = CallWithRetry(
          policy, absl::StrCat("shard ", i + 1, " (", peers_[i].address, ") ", what),
          [&](grpc::ClientContext* ctx) { return call(i, ctx); });
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

absl::Status FirstError(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace spotps
