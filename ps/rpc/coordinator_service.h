// The gRPC face of the Coordinator (hosted by shard 0).
#ifndef SPOTPS_PS_RPC_COORDINATOR_SERVICE_H_
#define SPOTPS_PS_RPC_COORDINATOR_SERVICE_H_

#include "ps/checkpoint/checkpoint_round_driver.h"
#include "ps/coordination/coordinator.h"
#include "ps/rpc/presence_streams.h"
#include "ps/rpc/worker_keys.h"
#include "spotps/v1/coordinator.grpc.pb.h"

namespace spotps {

// OK when `key` is `worker`'s and the call comes from the identity that
// registered it (WorkerKeys::Check, as a gRPC status).
grpc::Status CheckWorkerKey(const WorkerKeys& keys, const grpc::ServerContext& context,
                            uint64_t worker, const std::string& key);

// Serves spotps.v1.Coordinator. Promises: a request naming an unknown
// worker or unit gets NOT_FOUND or INVALID_ARGUMENT, and one without the
// worker's key (WorkerKeys) from the identity that registered it
// PERMISSION_DENIED; either changes nothing.
class CoordinatorService final : public v1::Coordinator::Service {
 public:
  // `rounds` may be null (no checkpointing): CheckpointNow then fails.
  // Borrows `keys`, which the TrainingReports service checks too.
  CoordinatorService(Coordinator* coordinator, CheckpointRoundDriver* rounds, WorkerKeys* keys)
      : coordinator_(coordinator), rounds_(rounds), keys_(keys) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  // Holds a worker's presence stream (coordinator.proto, AttendRequest)
  // until its client goes, StopAttendance, or PresenceStreams::kMaxAge.
  grpc::Status Attend(grpc::ServerContext* context, const v1::AttendRequest* request,
                      grpc::ServerWriter<v1::AttendResponse>* writer) override;
  grpc::Status Deregister(grpc::ServerContext*, const v1::DeregisterRequest* request,
                          v1::DeregisterResponse* response) override;
  grpc::Status AcquireUnit(grpc::ServerContext*, const v1::AcquireUnitRequest* request,
                           v1::AcquireUnitResponse* response) override;
  grpc::Status CommitUnit(grpc::ServerContext*, const v1::CommitUnitRequest* request,
                          v1::CommitUnitResponse* response) override;
  grpc::Status ReleaseUnit(grpc::ServerContext*, const v1::ReleaseUnitRequest* request,
                           v1::ReleaseUnitResponse* response) override;
  grpc::Status Progress(grpc::ServerContext*, const v1::ProgressRequest* request,
                        v1::ProgressResponse* response) override;
  grpc::Status CheckpointNow(grpc::ServerContext*, const v1::CheckpointNowRequest* request,
                             v1::CheckpointNowResponse* response) override;

  // Ends every presence stream at once and admits no more (the server is
  // going down; open streams would otherwise hold its grace period). Their
  // workers' leases are left as they are.
  void StopAttendance();

 private:
  // The request's worker_key and the caller's identity are its worker's.
  template <typename Request>
  grpc::Status Prove(const grpc::ServerContext& context, const Request& request) const {
    return CheckWorkerKey(*keys_, context, request.worker_id(), request.worker_key());
  }

  Coordinator* const coordinator_;
  CheckpointRoundDriver* const rounds_;
  WorkerKeys* const keys_;
  PresenceStreams presence_{"the coordinator", "heartbeats keep this worker's lease"};
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_COORDINATOR_SERVICE_H_
