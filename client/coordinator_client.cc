#include "client/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/grpc_presence_stream.h"
#include "common/grpc_status.h"
#include "common/rpc_retry.h"
#include "spotps/v1/coordinator.grpc.pb.h"
#include "spotps/v1/training_report.grpc.pb.h"

namespace spotps {

std::string UnitPushId(absl::string_view push_key, int64_t row_begin, int64_t row_end) {
  constexpr size_t kMaxPushKeyLength = 64;  // The id stays well inside a shard's 128 bytes.
  if (push_key.empty() || push_key.size() > kMaxPushKeyLength) return "";
  for (char c : push_key) {
    if (c < 0x21 || c > 0x7e) return "";
  }
  return absl::StrCat("u", push_key, "/", row_begin, "-", row_end);
}

struct CoordinatorClient::Connection {
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::unique_ptr<v1::TrainingReports::Stub> reports;  // Same channel.
};

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(
    const std::string& address, const RetryPolicy& policy, const ChannelSecurity& security) {
  if (address.find(':') == std::string::npos || address.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("coordinator address '", address,
                                                   "' is not one host:port (shard 0's address)"));
  }
  return std::unique_ptr<CoordinatorClient>(new CoordinatorClient(address, policy, security));
}

CoordinatorClient::CoordinatorClient(std::string address, const RetryPolicy& policy,
                                     const ChannelSecurity& security)
    : address_(std::move(address)), policy_(policy) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  std::shared_ptr<grpc::Channel> channel = CreateSecureChannel(address_, security, args);
  connection_ = std::make_unique<Connection>(
      Connection{v1::Coordinator::NewStub(channel), v1::TrainingReports::NewStub(channel)});
}

CoordinatorClient::~CoordinatorClient() = default;

absl::StatusOr<v1::RegisterResponse> CoordinatorClient::Register(const std::string& name,
                                                                 uint64_t tokens_per_unit) {
  v1::RegisterRequest request;
  request.set_name(name);
  request.set_tokens_per_unit(tokens_per_unit);
  v1::RegisterResponse response;
  absl::Status s = CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " Register"),
                                 [&](grpc::ClientContext* ctx) {
                                   return connection_->stub->Register(ctx, request, &response);
                                 });
  if (!s.ok()) return s;
  absl::MutexLock lock(&keys_mu_);
  keys_[response.worker_id()] = response.worker_key();
  return response;
}

std::string CoordinatorClient::KeyOf(uint64_t worker_id) const {
  absl::MutexLock lock(&keys_mu_);
  auto it = keys_.find(worker_id);
  return it == keys_.end() ? std::string() : it->second;
}

absl::Status CoordinatorClient::Heartbeat(uint64_t worker_id) {
  v1::HeartbeatRequest request;
  request.set_worker_id(worker_id);
  request.set_worker_key(KeyOf(worker_id));
  v1::HeartbeatResponse response;
  return CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " Heartbeat"),
                       [&](grpc::ClientContext* ctx) {
                         return connection_->stub->Heartbeat(ctx, request, &response);
                       });
}

absl::Status CoordinatorClient::Deregister(uint64_t worker_id) {
  v1::DeregisterRequest request;
  request.set_worker_id(worker_id);
  request.set_worker_key(KeyOf(worker_id));
  v1::DeregisterResponse response;
  absl::Status s = CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " Deregister"),
                                 [&](grpc::ClientContext* ctx) {
                                   return connection_->stub->Deregister(ctx, request, &response);
                                 });
  if (s.ok()) {
    absl::MutexLock lock(&keys_mu_);
    keys_.erase(worker_id);
  }
  return s;
}

std::unique_ptr<PresenceStream> CoordinatorClient::Attend(uint64_t worker_id) {
  v1::AttendRequest request;
  request.set_worker_id(worker_id);
  request.set_worker_key(KeyOf(worker_id));
  v1::Coordinator::Stub* stub = connection_->stub.get();
  return std::make_unique<GrpcPresenceStream<v1::AttendResponse>>(
      [stub, request](grpc::ClientContext* context) { return stub->Attend(context, request); },
      absl::StrCat("coordinator ", address_, " Attend"));
}

absl::StatusOr<v1::AcquireUnitResponse> CoordinatorClient::Acquire(uint64_t worker_id) {
  v1::AcquireUnitRequest request;
  request.set_worker_id(worker_id);
  request.set_worker_key(KeyOf(worker_id));
  v1::AcquireUnitResponse response;
  absl::Status s = CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " AcquireUnit"),
                                 [&](grpc::ClientContext* ctx) {
                                   return connection_->stub->AcquireUnit(ctx, request, &response);
                                 });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<bool> CoordinatorClient::Commit(uint64_t worker_id, uint32_t epoch, uint64_t index,
                                               const std::string& push_id) {
  v1::CommitUnitRequest request;
  request.set_worker_id(worker_id);
  request.set_worker_key(KeyOf(worker_id));
  request.set_epoch(epoch);
  request.set_index(index);
  request.set_push_id(push_id);
  v1::CommitUnitResponse response;
  absl::Status s = CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " CommitUnit"),
                                 [&](grpc::ClientContext* ctx) {
                                   return connection_->stub->CommitUnit(ctx, request, &response);
                                 });
  if (!s.ok()) return s;
  return response.duplicate();
}

absl::Status CoordinatorClient::Release(uint64_t worker_id, uint32_t epoch, uint64_t index) {
  v1::ReleaseUnitRequest request;
  request.set_worker_id(worker_id);
  request.set_worker_key(KeyOf(worker_id));
  request.set_epoch(epoch);
  request.set_index(index);
  v1::ReleaseUnitResponse response;
  return CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " ReleaseUnit"),
                       [&](grpc::ClientContext* ctx) {
                         return connection_->stub->ReleaseUnit(ctx, request, &response);
                       });
}

absl::StatusOr<v1::ProgressResponse> CoordinatorClient::Progress() {
  v1::ProgressResponse response;
  absl::Status s = CallWithRetry(
      policy_, absl::StrCat("coordinator ", address_, " Progress"), [&](grpc::ClientContext* ctx) {
        return connection_->stub->Progress(ctx, v1::ProgressRequest(), &response);
      });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::CheckpointNowResponse> CoordinatorClient::CheckpointNow() {
  v1::CheckpointNowResponse response;
  absl::Status s = CallWithRetry(policy_, absl::StrCat("coordinator ", address_, " CheckpointNow"),
                                 [&](grpc::ClientContext* ctx) {
                                   return connection_->stub->CheckpointNow(
                                       ctx, v1::CheckpointNowRequest(), &response);
                                 });
  if (!s.ok()) return s;
  return response;
}

absl::Status CoordinatorClient::Report(const v1::TrainingReportRequest& report,
                                       absl::Duration deadline) {
  RetryPolicy once = policy_;
  once.max_attempts = 1;
  once.deadline = deadline;
  v1::TrainingReportRequest keyed = report;
  if (keyed.worker_key().empty()) keyed.set_worker_key(KeyOf(report.worker_id()));
  v1::TrainingReportResponse response;
  return CallWithRetry(once, absl::StrCat("coordinator ", address_, " Report"),
                       [&](grpc::ClientContext* ctx) {
                         return connection_->reports->Report(ctx, keyed, &response);
                       });
}

}  // namespace spotps
