// ShardMetrics: what a spotps-ps shard exports to Prometheus on
// --metrics_listen (the list is in docs/operations.md, Metrics).
#ifndef SPOTPS_PS_RPC_SHARD_METRICS_H_
#define SPOTPS_PS_RPC_SHARD_METRICS_H_

#include <grpcpp/grpcpp.h>

#include "common/metrics_registry.h"
#include "ps/checkpoint/shard_checkpointer.h"
#include "ps/coordination/coordinator.h"
#include "ps/coordination/training_history.h"
#include "ps/store/shard_store.h"

namespace spotps {

// Owns the shard's metric handles in `registry`; borrows the store and (each
// may be null) the checkpointer, the coordinator and the training history.
// Promises: RPC timings and refusals are counted as they happen; the rest
// (pushes applied, bytes, partitions, versions, checkpoints, coordinator
// progress) is read from its owners at each scrape, so it can never drift
// from what Stats and Progress report.
class ShardMetrics {
 public:
  ShardMetrics(MetricsRegistry* registry, const ShardStore* store,
               const ShardCheckpointer* checkpointer, Coordinator* coordinator,
               const TrainingHistory* history);

  void ObservePull(absl::Duration took, const grpc::Status& status);
  // `apply` is the time the store spent applying (zero if it never got there).
  void ObservePush(absl::Duration took, absl::Duration apply, const grpc::Status& status);
  void ObserveStaleness(uint64_t staleness) { staleness_->Observe(static_cast<double>(staleness)); }

  // "too_stale", "invalid", ...: the label a refused push is counted under.
  static std::string RefusalReason(grpc::StatusCode code);

 private:
  void Collect();
  void CollectCoordinator();

  MetricsRegistry* const registry_;
  const ShardStore* const store_;
  const ShardCheckpointer* const checkpointer_;
  Coordinator* const coordinator_;
  const TrainingHistory* const history_;
  const std::string shard_;  // The `shard` label of every series.
  MetricHistogram* pull_seconds_;
  MetricHistogram* push_seconds_;
  MetricHistogram* apply_seconds_;
  MetricHistogram* staleness_;
  MetricCounter* pulls_failed_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_SHARD_METRICS_H_
