#include "ps/rpc/coordinator_service.h"

#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "common/grpc_status.h"
#include "ps/rpc/shard_security.h"

namespace spotps {
namespace {

constexpr size_t kMaxWorkerNameLength = 256;

// The keys of workers that are gone (expired, deregistered) go with them.
void ForgetDeparted(Coordinator& coordinator, WorkerKeys& keys) {
  const v1::ProgressResponse progress = coordinator.Progress();
  std::set<uint64_t> live;
  for (const v1::WorkerStatus& w : progress.workers()) live.insert(w.worker_id());
  keys.Retain([&live](uint64_t id) { return live.count(id) != 0; });
}

}  // namespace

grpc::Status CheckWorkerKey(const WorkerKeys& keys, const grpc::ServerContext& context,
                            uint64_t worker, const std::string& key) {
  return ToGrpcStatus(keys.Check(worker, key, CallerIdentity(context)));
}

grpc::Status CoordinatorService::Register(grpc::ServerContext* context,
                                          const v1::RegisterRequest* request,
                                          v1::RegisterResponse* response) {
  if (request->name().size() > kMaxWorkerNameLength) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker name longer than 256 bytes");
  }
  absl::StatusOr<uint64_t> worker =
      coordinator_->Register(request->name(), request->tokens_per_unit());
  if (!worker.ok()) return ToGrpcStatus(worker.status());
  ForgetDeparted(*coordinator_, *keys_);
  response->set_worker_key(keys_->Issue(*worker, CallerIdentity(*context)));
  response->set_worker_id(*worker);
  response->set_lease_ms(absl::ToInt64Milliseconds(coordinator_->worker_lease()));
  response->set_consistency(coordinator_->consistency().mode);
  response->set_local_steps(static_cast<uint32_t>(coordinator_->consistency().local_steps));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* context,
                                           const v1::HeartbeatRequest* request,
                                           v1::HeartbeatResponse* response) {
  if (grpc::Status k = Prove(*context, *request); !k.ok()) return k;
  if (absl::Status s = coordinator_->Heartbeat(request->worker_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  response->set_lease_ms(absl::ToInt64Milliseconds(coordinator_->worker_lease()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Attend(grpc::ServerContext* context,
                                        const v1::AttendRequest* request,
                                        grpc::ServerWriter<v1::AttendResponse>* writer) {
  if (grpc::Status k = Prove(*context, *request); !k.ok()) return k;
  if (grpc::Status admitted = presence_.Admit(); !admitted.ok()) return admitted;
  absl::Cleanup release = [this] { presence_.Release(); };
  const uint64_t worker = request->worker_id();
  if (absl::Status s = coordinator_->OpenPresence(worker); !s.ok()) return ToGrpcStatus(s);
  v1::AttendResponse response;
  response.set_lease_ms(absl::ToInt64Milliseconds(coordinator_->worker_lease()));
  response.set_grace_ms(absl::ToInt64Milliseconds(coordinator_->presence_grace()));
  const PresenceStreams::End end =
      writer->Write(response) ? presence_.Hold(*context) : PresenceStreams::End::kBroken;
  coordinator_->ClosePresence(worker, end == PresenceStreams::End::kBroken);
  return presence_.StatusFor(end);
}

void CoordinatorService::StopAttendance() { presence_.Shutdown(); }

grpc::Status CoordinatorService::Deregister(grpc::ServerContext* context,
                                            const v1::DeregisterRequest* request,
                                            v1::DeregisterResponse*) {
  if (grpc::Status k = Prove(*context, *request); !k.ok()) return k;
  const absl::Status s = coordinator_->Deregister(request->worker_id());
  if (s.ok()) keys_->Forget(request->worker_id());
  return ToGrpcStatus(s);
}

grpc::Status CoordinatorService::AcquireUnit(grpc::ServerContext* context,
                                             const v1::AcquireUnitRequest* request,
                                             v1::AcquireUnitResponse* response) {
  if (grpc::Status k = Prove(*context, *request); !k.ok()) return k;
  absl::StatusOr<WorkUnitDispatcher::Grant> grant = coordinator_->Acquire(request->worker_id());
  if (!grant.ok()) return ToGrpcStatus(grant.status());
  switch (grant->outcome) {
    case WorkUnitDispatcher::Outcome::kUnit: {
      response->set_outcome(v1::AcquireUnitResponse::OUTCOME_UNIT);
      v1::WorkUnit* unit = response->mutable_unit();
      unit->set_epoch(grant->epoch);
      unit->set_index(grant->index);
      unit->set_data_unit(grant->data_unit);
      unit->set_push_key(grant->push_key);
      const absl::Duration lease = coordinator_->unit_lease();
      unit->set_lease_ms(lease == absl::InfiniteDuration() ? 0 : absl::ToInt64Milliseconds(lease));
      break;
    }
    case WorkUnitDispatcher::Outcome::kWait:
      response->set_outcome(v1::AcquireUnitResponse::OUTCOME_WAIT);
      response->set_workers_to_start(grant->workers_to_start);
      break;
    case WorkUnitDispatcher::Outcome::kDone:
      response->set_outcome(v1::AcquireUnitResponse::OUTCOME_DONE);
      break;
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitUnit(grpc::ServerContext* context,
                                            const v1::CommitUnitRequest* request,
                                            v1::CommitUnitResponse* response) {
  if (grpc::Status k = Prove(*context, *request); !k.ok()) return k;
  absl::StatusOr<bool> duplicate = coordinator_->Commit(request->worker_id(), request->epoch(),
                                                        request->index(), request->push_id());
  if (!duplicate.ok()) return ToGrpcStatus(duplicate.status());
  response->set_duplicate(*duplicate);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReleaseUnit(grpc::ServerContext* context,
                                             const v1::ReleaseUnitRequest* request,
                                             v1::ReleaseUnitResponse*) {
  if (grpc::Status k = Prove(*context, *request); !k.ok()) return k;
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
