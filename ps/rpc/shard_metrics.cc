#include "ps/rpc/shard_metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

ShardMetrics::ShardMetrics(MetricsRegistry* registry, const ShardStore* store,
                           const ShardCheckpointer* checkpointer, Coordinator* coordinator,
                           const TrainingHistory* history)
    : registry_(registry),
      store_(store),
      checkpointer_(checkpointer),
      coordinator_(coordinator),
      history_(history),
      shard_(absl::StrCat(store->options().shard_index)) {
  const MetricLabels shard = {{"shard", shard_}};
  pull_seconds_ = registry->Histogram("spotps_shard_pull_seconds",
                                      "Time to serve one Pull RPC (all requested partitions).",
                                      MetricsRegistry::LatencyBounds(), shard);
  push_seconds_ = registry->Histogram("spotps_shard_push_seconds",
                                      "Time to serve one Push RPC, receiving the stream included.",
                                      MetricsRegistry::LatencyBounds(), shard);
  apply_seconds_ = registry->Histogram(
      "spotps_shard_apply_seconds",
      "Time the store spent applying one push (optimizer step or holding it for a sync round).",
      MetricsRegistry::LatencyBounds(), shard);
  staleness_ = registry->Histogram(
      "spotps_shard_push_staleness",
      "Staleness of each applied push per partition: updates between its base version and now.",
      MetricsRegistry::CountBounds(), shard);
  pulls_failed_ = registry->Counter("spotps_shard_pulls_failed_total",
                                    "Pull RPCs that ended with an error.", shard);
  registry->AddCollector([this] { Collect(); });
}

std::string ShardMetrics::RefusalReason(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::ABORTED:
      return "too_stale";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "version_out_of_range";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "invalid";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "too_large";
    case grpc::StatusCode::CANCELLED:
      return "cancelled";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "failed_precondition";
    case grpc::StatusCode::NOT_FOUND:
      return "unknown_partition";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline_exceeded";
    default:
      return "other";
  }
}

void ShardMetrics::ObservePull(absl::Duration took, const grpc::Status& status) {
  pull_seconds_->Observe(Seconds(took));
  if (!status.ok()) pulls_failed_->Increment();
}

void ShardMetrics::ObservePush(absl::Duration took, absl::Duration apply,
                               const grpc::Status& status) {
  push_seconds_->Observe(Seconds(took));
  if (apply > absl::ZeroDuration()) apply_seconds_->Observe(Seconds(apply));
  if (!status.ok()) {
    registry_
        ->Counter("spotps_shard_pushes_refused_total",
                  "Pushes refused, by reason (too_stale, version_out_of_range, invalid, "
                  "too_large, cancelled, failed_precondition, unknown_partition, ...).",
                  {{"shard", shard_}, {"reason", RefusalReason(status.error_code())}})
        ->Increment();
  }
}

void ShardMetrics::Collect() {
  const MetricLabels shard = {{"shard", shard_}};
  v1::StatsResponse stats;
  store_->FillStats(&stats);
  MetricsRegistry& r = *registry_;
  r.Counter("spotps_shard_pushes_applied_total", "Pushes applied to this shard's weights.", shard)
      ->Set(static_cast<double>(stats.pushes_applied()));
  r.Counter("spotps_shard_pushes_duplicate_total",
            "Retried pushes recognised by their push id and not applied again.", shard)
      ->Set(static_cast<double>(stats.pushes_duplicate()));
  r.Counter("spotps_shard_averaged_updates_waited_out_total",
            "Averaged updates applied when their wait ran out, short of their k pushes.", shard)
      ->Set(static_cast<double>(stats.averaged_updates_waited_out()));
  r.Counter("spotps_shard_pulls_total", "Pull RPCs served.", shard)
      ->Set(static_cast<double>(stats.pulls()));
  r.Counter("spotps_shard_received_bytes_total", "Gradient payload bytes of accepted pushes.",
            shard)
      ->Set(static_cast<double>(stats.bytes_in()));
  r.Counter("spotps_shard_sent_bytes_total", "Weight payload bytes sent by pulls.", shard)
      ->Set(static_cast<double>(stats.bytes_out()));
  r.Gauge("spotps_shard_global_step", "Updates applied by this shard (drives the schedule).", shard)
      ->Set(static_cast<double>(stats.global_step()));
  r.Gauge("spotps_shard_learning_rate", "Learning rate at the current global step.", shard)
      ->Set(stats.learning_rate());
  r.Gauge("spotps_shard_initialized", "1 once a trainer initialised the model here.", shard)
      ->Set(stats.initialized() ? 1 : 0);
  r.Gauge("spotps_shard_partitions", "Partitions this shard owns.", shard)
      ->Set(stats.partitions_size());
  uint64_t elements = 0;
  for (const v1::PartitionStats& p : stats.partitions()) {
    elements += p.num_elements();
    r.Gauge("spotps_shard_partition_version", "Updates applied to each partition.",
            {{"shard", shard_}, {"partition", absl::StrCat(p.partition_id())}})
        ->Set(static_cast<double>(p.version()));
  }
  r.Gauge("spotps_shard_parameters", "Parameters (FP32 elements) this shard holds.", shard)
      ->Set(static_cast<double>(elements));
  r.Gauge("spotps_shard_parameter_bytes", "Bytes of FP32 master weights this shard holds.", shard)
      ->Set(static_cast<double>(elements) * 4);
  if (checkpointer_ != nullptr) {
    const ShardCheckpointer::Success last = checkpointer_->last_success();
    if (last.time != absl::InfinitePast()) {
      r.Gauge("spotps_shard_checkpoint_last_success_timestamp_seconds",
              "Unix time the last successful checkpoint write ended.", shard)
          ->Set(absl::ToDoubleSeconds(last.time - absl::UnixEpoch()));
      r.Gauge("spotps_shard_checkpoint_last_duration_seconds",
              "How long the last successful checkpoint write took.", shard)
          ->Set(last.seconds);
      r.Gauge("spotps_shard_checkpoint_last_bytes", "Size of the last checkpoint written.", shard)
          ->Set(static_cast<double>(last.bytes));
    }
    r.Gauge("spotps_shard_checkpoint_last_id", "Newest checkpoint id this shard wrote.", shard)
        ->Set(static_cast<double>(checkpointer_->last_written_id()));
    r.Gauge("spotps_shard_checkpoint_failing",
            "1 while the last checkpoint write failed (disk full, I/O error).", shard)
        ->Set(checkpointer_->last_failure().message.empty() ? 0 : 1);
  }
  if (coordinator_ != nullptr) CollectCoordinator();
}

void ShardMetrics::CollectCoordinator() {
  const v1::ProgressResponse p = coordinator_->Progress();
  MetricsRegistry& r = *registry_;
  r.Gauge("spotps_coordinator_workers_live", "Trainers holding a live lease.")
      ->Set(p.workers_size());
  r.Counter("spotps_coordinator_workers_expired_total", "Trainer leases that expired.")
      ->Set(static_cast<double>(p.workers_expired()));
  r.Gauge("spotps_coordinator_epoch", "The epoch units are being issued from.")
      ->Set(p.current_epoch());
  r.Gauge("spotps_coordinator_epochs", "Epochs the job runs.")->Set(p.num_epochs());
  r.Gauge("spotps_coordinator_done", "1 once every unit of every epoch is committed.")
      ->Set(p.done() ? 1 : 0);
  for (const v1::EpochProgress& e : p.epochs()) {
    const MetricLabels epoch = {{"epoch", absl::StrCat(e.epoch())}};
    r.Gauge("spotps_coordinator_units", "Work units in each epoch.", epoch)
        ->Set(static_cast<double>(e.units()));
    r.Gauge("spotps_coordinator_units_leased", "Units leased to a trainer now.", epoch)
        ->Set(static_cast<double>(e.leased()));
    // Counters that a rollback to a checkpoint can lower: Prometheus reads
    // that as a counter reset.
    r.Counter("spotps_coordinator_units_committed_total", "Units committed, per epoch.", epoch)
        ->Set(static_cast<double>(e.committed()));
    r.Counter("spotps_coordinator_units_reissued_total",
              "Unit leases that expired or were released (the unit went back), per epoch.", epoch)
        ->Set(static_cast<double>(e.reissued()));
    r.Counter("spotps_coordinator_units_duplicated_total",
              "Commits of a unit already committed (trained twice), per epoch.", epoch)
        ->Set(static_cast<double>(e.duplicated()));
  }
  r.Counter("spotps_coordinator_sync_rounds_applied_total", "Sync rounds applied on every shard.")
      ->Set(static_cast<double>(p.sync_rounds_applied()));
  r.Counter("spotps_coordinator_sync_rounds_abandoned_total",
            "Sync rounds given up (their units re-issued).")
      ->Set(static_cast<double>(p.sync_rounds_abandoned()));
  if (history_ != nullptr) {
    r.Counter("spotps_coordinator_training_reports_total",
              "Training reports (losses, throughput) accepted from trainers.")
        ->Set(static_cast<double>(history_->accepted()));
  }
}

}  // namespace spotps
