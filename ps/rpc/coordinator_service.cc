#include "ps/rpc/coordinator_service.h"

#include "common/grpc_status.h"

namespace spotps {
namespace {

constexpr size_t kMaxWorkerNameLength = 256;

}  // namespace

grpc::Status CoordinatorService::Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                                          v1::RegisterResponse* response) {
  if (request->name().size() > kMaxWorkerNameLength) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker name longer than 256 bytes");
  }
  absl::StatusOr<uint64_t> worker =
      coordinator_->Register(request->name(), request->tokens_per_unit());
  if (!worker.ok()) return ToGrpcStatus(worker.status());
  response->set_worker_id(*worker);
  response->set_lease_ms(absl::ToInt64Milliseconds(coordinator_->worker_lease()));
  response->set_consistency(coordinator_->consistency().mode);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext*,
                                           const v1::HeartbeatRequest* request,
                                           v1::HeartbeatResponse* response) {
  if (absl::Status s = coordinator_->Heartbeat(request->worker_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  response->set_lease_ms(absl::ToInt64Milliseconds(coordinator_->worker_lease()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Deregister(grpc::ServerContext*,
                                            const v1::DeregisterRequest* request,
                                            v1::DeregisterResponse*) {
  return ToGrpcStatus(coordinator_->Deregister(request->worker_id()));
}

grpc::Status CoordinatorService::AcquireUnit(grpc::ServerContext*,
                                             const v1::AcquireUnitRequest* request,
                                             v1::AcquireUnitResponse* response) {
  absl::StatusOr<WorkUnitDispatcher::Grant> grant = coordinator_->Acquire(request->worker_id());
  if (!grant.ok()) return ToGrpcStatus(grant.status());
  switch (grant->outcome) {
    case WorkUnitDispatcher::Outcome::kUnit: {
      response->set_outcome(v1::AcquireUnitResponse::OUTCOME_UNIT);
      v1::WorkUnit* unit = response->mutable_unit();
      unit->set_epoch(grant->epoch);
      unit->set_index(grant->index);
      unit->set_data_unit(grant->data_unit);
      const absl::Duration lease = coordinator_->unit_lease();
      unit->set_lease_ms(lease == absl::InfiniteDuration() ? 0 : absl::ToInt64Milliseconds(lease));
      break;
    }
    case WorkUnitDispatcher::Outcome::kWait:
      response->set_outcome(v1::AcquireUnitResponse::OUTCOME_WAIT);
      break;
    case WorkUnitDispatcher::Outcome::kDone:
      response->set_outcome(v1::AcquireUnitResponse::OUTCOME_DONE);
      break;
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitUnit(grpc::ServerContext*,
                                            const v1::CommitUnitRequest* request,
                                            v1::CommitUnitResponse* response) {
  absl::StatusOr<bool> duplicate = coordinator_->Commit(request->worker_id(), request->epoch(),
                                                        request->index(), request->push_id());
  if (!duplicate.ok()) return ToGrpcStatus(duplicate.status());
  response->set_duplicate(*duplicate);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReleaseUnit(grpc::ServerContext*,
                                             const v1::ReleaseUnitRequest* request,
                                             v1::ReleaseUnitResponse*) {
  return ToGrpcStatus(
      coordinator_->Release(request->worker_id(), request->epoch(), request->index()));
}

grpc::Status CoordinatorService::Progress(grpc::ServerContext*, const v1::ProgressRequest*,
                                          v1::ProgressResponse* response) {
  *response = coordinator_->Progress();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CheckpointNow(grpc::ServerContext*,
                                               const v1::CheckpointNowRequest*,
                                               v1::CheckpointNowResponse* response) {
  if (rounds_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "shard 0 runs without --checkpoint_dir");
  }
  absl::StatusOr<v1::CheckpointNowResponse> round = rounds_->RunNow();
  if (!round.ok()) return ToGrpcStatus(round.status());
  *response = *round;
  return grpc::Status::OK;
}

}  // namespace spotps
