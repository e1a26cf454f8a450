// The gRPC face of one shard: decodes and bounds each request, hands it to
// the ShardStore, and maps the outcome to a precise gRPC status.
#ifndef SPOTPS_PS_RPC_PARAMETER_SERVER_SERVICE_H_
#define SPOTPS_PS_RPC_PARAMETER_SERVER_SERVICE_H_

#include "ps/checkpoint/shard_checkpointer.h"
#include "ps/rpc/presence_streams.h"
#include "ps/rpc/push_staging.h"
#include "ps/rpc/recent_pushers.h"
#include "ps/rpc/shard_metrics.h"
#include "ps/rpc/update_signal.h"
#include "ps/store/shard_store.h"
#include "spotps/v1/parameter_server.grpc.pb.h"

namespace spotps {

// Serves spotps.v1.ParameterServer for one shard. Promises: a request that
// fails validation changes no state; a push or init is applied whole or not
// at all: only after its stream ended normally (a cancelled, expired or
// disconnected one is CANCELLED) and, for a push, covered exactly what its
// first message announced; every init and push stream is bounded in
// messages, chunks and payload bytes by this shard's own partitions (and the
// push's checked announcement), and cut off with RESOURCE_EXHAUSTED as soon
// as it crosses a bound; an init of a different model is refused on its
// first message. Watch streams are bounded in number (RESOURCE_EXHAUSTED
// beyond max_watchers) and in time (kMaxWatchDuration), and end at once
// with UNAVAILABLE after StopWatches.
class ParameterServerService final : public v1::ParameterServer::Service {
 public:
  // `checkpointer` may be null (no --checkpoint_dir). `incarnation` tells
  // clients and shard 0 this process apart from an earlier one. `metrics`
  // (may be null) counts pulls and pushes for --metrics_listen.
  static constexpr int kDefaultMaxWatchers = 32;
  static constexpr absl::Duration kMaxWatchDuration = absl::Seconds(300);

  ParameterServerService(ShardStore* store, ShardCheckpointer* checkpointer, uint64_t incarnation,
                         ShardMetrics* metrics = nullptr, int max_watchers = kDefaultMaxWatchers);

  grpc::Status GetLayout(grpc::ServerContext* context, const v1::GetLayoutRequest* request,
                         v1::GetLayoutResponse* response) override;
  grpc::Status Init(grpc::ServerContext* context, grpc::ServerReader<v1::InitRequest>* reader,
                    v1::InitResponse* response) override;
  // Pull and Push are served without protobuf's payload copies: their
  // handlers (installed by the constructor) read and write raw messages
  // (common/chunk_frame.h), in the same wire format.
  grpc::Status PullFrames(grpc::ServerContext* context,
                          grpc::ServerSplitStreamer<v1::PullRequest, grpc::ByteBuffer>* stream);
  grpc::Status PushFrames(grpc::ServerContext* context,
                          grpc::ServerReader<grpc::ByteBuffer>* reader, v1::PushResponse* response);
  grpc::Status Stats(grpc::ServerContext* context, const v1::StatsRequest* request,
                     v1::StatsResponse* response) override;
  grpc::Status WriteCheckpoint(grpc::ServerContext* context,
                               const v1::WriteCheckpointRequest* request,
                               v1::WriteCheckpointResponse* response) override;
  grpc::Status ApplyRound(grpc::ServerContext* context, const v1::ApplyRoundRequest* request,
                          v1::ApplyRoundResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::WatchResponse>* writer) override;
  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override;
  grpc::Status Leave(grpc::ServerContext* context, const v1::LeaveRequest* request,
                     v1::LeaveResponse* response) override;
  // Holds a worker's presence stream (PresenceRequest) until its client
  // goes (then the worker counts no more, as after Leave), StopWatches, or
  // PresenceStreams::kMaxAge.
  grpc::Status Attend(grpc::ServerContext* context, const v1::PresenceRequest* request,
                      grpc::ServerWriter<v1::PresenceResponse>* writer) override;

  // Ends every open Watch and presence stream (UNAVAILABLE) and refuses new
  // ones: call before shutting the server down, so they do not hold it up.
  void StopWatches() {
    updates_.Shutdown();
    presence_.Shutdown();
  }
  // Clients (PushRequest.worker_id) that push to this shard and have not
  // fallen silent (RecentPushers): its live workers as it sees them.
  int RecentWorkers() { return pushers_.Count(absl::Now()); }
  // How long a held push waits for the rest of its averaged update: the
  // shard's average_wait_ms, and in local mode longer, after the trainers'
  // median round time (AveragingWaitsFor, staleness_method.h).
  AveragingWaits HeldUpdateWaits();

 private:
  // Tells the store how many workers push to it now, `worker` having
  // started to count (`change` says how, for the log).
  void RecountPushers(absl::string_view worker, absl::string_view change);
  // Stops counting `worker` (`why`, for the log), at once, so that an
  // update waiting for it stops waiting; its held pushes no longer count
  // toward their update (ShardStore::StopCounting). False if it did not
  // count.
  bool StopCounting(absl::string_view worker, absl::string_view why);
  // Logs a worker starting or stopping to count, where averaging waits on
  // the count.
  void LogMembership(absl::string_view worker, absl::string_view change, int live) const;
  grpc::Status ServePull(grpc::ServerContext* context, const v1::PullRequest* request,
                         grpc::ServerSplitStreamer<v1::PullRequest, grpc::ByteBuffer>* stream);
  // `apply` receives the time the store took to apply the push.
  grpc::Status ServePush(grpc::ServerContext* context, grpc::ServerReader<grpc::ByteBuffer>* reader,
                         v1::PushResponse* response, absl::Duration* apply);
  // "fresh": waits (bounded, at most half the call's deadline) until the averaged
  // update holding the push is applied, then reports the versions after it.
  void AwaitFreshWeights(const grpc::ServerContext& context, bool new_worker, PushOutcome* outcome);
  // The watched partitions' versions and the shard's counters now.
  void FillWatchResponse(const std::vector<uint32_t>& ids, v1::WatchResponse* response) const;
  uint64_t LastCheckpointId() const;  // 0 without a checkpointer.

  ShardStore* const store_;
  ShardCheckpointer* const checkpointer_;
  const uint64_t incarnation_;
  ShardMetrics* const metrics_;
  // Rung after every init, applied push and applied round.
  UpdateSignal updates_;
  // Memory push streams stage their payloads in, reused across pushes.
  StagingPool staging_;
  RecentPushers pushers_;
  PresenceStreams presence_{"the shard", "it counts this worker by its pushes alone"};
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_PARAMETER_SERVER_SERVICE_H_
