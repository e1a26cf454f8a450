// WorkerMembership: keeps one trainer registered with the coordinator.
#ifndef SPOTPS_TRAINER_ELASTIC_WORKER_MEMBERSHIP_H_
#define SPOTPS_TRAINER_ELASTIC_WORKER_MEMBERSHIP_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/presence_stream.h"
#include "common/background_loop.h"

namespace spotps {

// Owns the worker's registration, a heartbeat thread (every lease / 3) and
// a PresenceKeeper that keeps a presence stream open (Coordinator.Attend:
// a kill of this process cuts its lease to the coordinator's grace).
// Promises: if the lease is ever lost (a long stall, a coordinator restart)
// the next heartbeat registers again under a new id; Leave() deregisters,
// so the coordinator re-issues nothing it holds, then stops both threads.
class WorkerMembership {
 public:
  // Registers, waiting up to `timeout` for a coordinator that is not
  // reachable yet (its shard still starting). `tokens_per_unit` is what one
  // work unit trains (CoordinatorClient::Register).
  static absl::StatusOr<std::unique_ptr<WorkerMembership>> Join(CoordinatorClient* coordinator,
                                                                const std::string& name,
                                                                uint64_t tokens_per_unit,
                                                                absl::Duration timeout);
  ~WorkerMembership();

  uint64_t worker_id() const { return worker_id_.load(); }
  // How the coordinator paces workers, as it said at registration.
  v1::Consistency consistency() const { return consistency_; }
  // Local mode: units per round (H); 0 in the other modes.
  uint32_t local_steps() const { return local_steps_; }
  // Registers again now (after an RPC said NOT_FOUND).
  absl::Status Rejoin();
  void Leave();

 private:
  WorkerMembership(CoordinatorClient* coordinator, std::string name, uint64_t tokens_per_unit)
      : coordinator_(coordinator), name_(std::move(name)), tokens_per_unit_(tokens_per_unit) {}
  void Heartbeat();

  CoordinatorClient* const coordinator_;
  const std::string name_;
  const uint64_t tokens_per_unit_;
  std::atomic<uint64_t> worker_id_{0};
  v1::Consistency consistency_ = v1::CONSISTENCY_ASYNC;  // Set by Join.
  uint32_t local_steps_ = 0;                              // Set by Join.
  std::unique_ptr<BackgroundLoop> heartbeat_;  // Set by Join.
  bool left_ = false;
  std::unique_ptr<PresenceKeeper> presence_;  // Set by Join.
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_WORKER_MEMBERSHIP_H_
