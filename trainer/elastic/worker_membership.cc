#include "trainer/elastic/worker_membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/unreachable_wait.h"
#include "common/log.h"
#include "common/work_limits.h"

namespace spotps {

absl::StatusOr<std::unique_ptr<WorkerMembership>> WorkerMembership::Join(
    CoordinatorClient* coordinator, const std::string& name, uint64_t tokens_per_unit,
    absl::Duration timeout) {
  auto membership = std::unique_ptr<WorkerMembership>(
      new WorkerMembership(coordinator, name, tokens_per_unit));
  absl::StatusOr<v1::RegisterResponse> registered =
      UnreachableWait(absl::StrCat("the coordinator at ", coordinator->address(), " to register"),
                      timeout)
          .Retry<v1::RegisterResponse>(
              [&] { return coordinator->Register(name, tokens_per_unit); });
  if (!registered.ok()) return registered.status();
  membership->worker_id_ = registered->worker_id();
  membership->consistency_ = registered->consistency();
  membership->local_steps_ = registered->local_steps();
  // An answer from the network: a round the trainer could never finish (or
  // local mode without one) is refused here, not found out H units later.
  if ((registered->consistency() == v1::CONSISTENCY_LOCAL) !=
          (registered->local_steps() > 0) ||
      registered->local_steps() > kMaxLocalSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the coordinator at ", coordinator->address(), " runs consistency ",
        v1::Consistency_Name(registered->consistency()), " with ", registered->local_steps(),
        " local steps: local mode needs 1 to ", kMaxLocalSteps, ", the other modes none"));
  }
  const absl::Duration every =
      absl::Milliseconds(std::max<uint64_t>(registered->lease_ms() / 3, 50));
  WorkerMembership* self = membership.get();
  // Before the heartbeat, whose Rejoin reopens it.
  membership->presence_ = std::make_unique<PresenceKeeper>(
      [self] { return self->coordinator_->Attend(self->worker_id_.load()); });
  membership->heartbeat_ = std::make_unique<BackgroundLoop>(every, [self] { self->Heartbeat(); });
  membership->heartbeat_->Start();
  return membership;
}

WorkerMembership::~WorkerMembership() { Leave(); }

absl::Status WorkerMembership::Rejoin() {
  absl::StatusOr<v1::RegisterResponse> registered = coordinator_->Register(name_, tokens_per_unit_);
  if (!registered.ok()) return registered.status();
  worker_id_ = registered->worker_id();
  // The open presence stream speaks for the old id: the next one, for this.
  if (presence_ != nullptr) presence_->Reopen();
  return absl::OkStatus();
}

void WorkerMembership::Heartbeat() {
  absl::Status s = coordinator_->Heartbeat(worker_id_.load());
  if (absl::IsNotFound(s)) {
    LogWarningF("[%s] lease lost, registering again", name_);
    Rejoin().IgnoreError();  // Retried at the next beat if it fails.
  }
}

void WorkerMembership::Leave() {
  if (left_) return;
  left_ = true;
  if (heartbeat_ != nullptr) heartbeat_->Stop();
  coordinator_->Deregister(worker_id_.load()).IgnoreError();
  if (presence_ != nullptr) presence_->Stop();
}

}  // namespace spotps
