// PeerShards: shard 0's connections to the other shards, for the rounds it
// drives across the cluster (checkpoints, synchronous updates).
#ifndef SPOTPS_PS_COORDINATION_PEER_SHARDS_H_
#define SPOTPS_PS_COORDINATION_PEER_SHARDS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/channel_security.h"
#include "common/fan_out_pool.h"
#include "common/rpc_retry.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

// Owns one channel and stub per peer, and the threads that call them; peer i is shard i + 1.
// Promises: stubs are safe to use from several threads; CallAll calls every peer at once, each with
// bounded retries, and reports each peer's outcome.
class PeerShards {
 public:
  // `addresses` lists shards 1..n-1 in order; `security` is how shard 0
  // reaches them (its calls need an admin token where shards check tokens).
  explicit PeerShards(const std::vector<std::string>& addresses,
                      const ChannelSecurity& security = {});

  size_t size() const { return peers_.size(); }
  const std::string& address(size_t i) const { return peers_[i].address; }
  v1::ParameterServer::Stub& stub(size_t i) { return *peers_[i].stub; }

  // Runs call(i, context) for every peer in parallel under `policy`; returns
  // one status per peer, errors prefixed "shard <i+1> (<address>) <what>".
  std::vector<absl::Status> CallAll(
      const RetryPolicy& policy, absl::string_view what,
      const std::function<grpc::Status(size_t, grpc::ClientContext*)>& call);

 private:
  struct Peer {
    std::string address;
    std::unique_ptr<v1::ParameterServer::Stub> stub;
  };
  std::vector<Peer> peers_;
  FanOutPool pool_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_PEER_SHARDS_H_
