#include "trainer/worker_membership.h"

#include <cstdio>

namespace spotps {

absl::StatusOr<std::unique_ptr<WorkerMembership>> WorkerMembership::Join(
    CoordinatorClient* coordinator, const std::string& name) {
  auto membership = std::unique_ptr<WorkerMembership>(new WorkerMembership(coordinator, name));
  absl::StatusOr<v1::RegisterResponse> registered = coordinator->Register(name);
  if (!registered.ok()) return registered.status();
  membership->worker_id_ = registered->worker_id();
  membership->consistency_ = registered->consistency();
  const absl::Duration every = absl::Milliseconds(std::max<uint64_t>(registered->lease_ms() / 3, 50));
  WorkerMembership* self = membership.get();
  membership->heartbeat_ = std::thread([self, every] { self->HeartbeatLoop(every); });
  return membership;
}

WorkerMembership::~WorkerMembership() { Leave(); }

absl::Status WorkerMembership::Rejoin() {
  absl::StatusOr<v1::RegisterResponse> registered = coordinator_->Register(name_);
  if (!registered.ok()) return registered.status();
  worker_id_ = registered->worker_id();
  return absl::OkStatus();
}

void WorkerMembership::HeartbeatLoop(absl::Duration every) {
  while (!stop_.WaitForNotificationWithTimeout(every)) {
    absl::Status s = coordinator_->Heartbeat(worker_id_.load());
    if (absl::IsNotFound(s)) {
      std::fprintf(stderr, "[%s] lease lost, registering again\n", name_.c_str());
      Rejoin().IgnoreError();  // Retried at the next beat if it fails.
    }
  }
}

void WorkerMembership::Leave() {
  if (left_) return;
  left_ = true;
  stop_.Notify();
  if (heartbeat_.joinable()) heartbeat_.join();
  coordinator_->Deregister(worker_id_.load()).IgnoreError();
}

}  // namespace spotps
