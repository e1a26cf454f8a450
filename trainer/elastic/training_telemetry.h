// TrainingTelemetry: what a trainer tells the people running it besides its
// log lines: Prometheus metrics (--metrics_listen) and training reports
// (losses, throughput) to shard 0's coordinator for the status page.
#ifndef SPOTPS_TRAINER_ELASTIC_TRAINING_TELEMETRY_H_
#define SPOTPS_TRAINER_ELASTIC_TRAINING_TELEMETRY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "common/background_loop.h"
#include "common/metrics_registry.h"
#include "trainer/elastic/training_worker.h"
#include "trainer/elastic/worker_membership.h"

namespace spotps {

// Owns the trainer's metric handles and a thread that sends a report every
// `report_every` while steps advance; borrows the rest. `registry` may be
// null (no metrics), `coordinator`/`membership` null (no reports).
// Promises: OnStep/OnEval only update counters under a short lock (no RPC on
// the training thread); reports are best effort (one attempt, 2 s deadline)
// and a failed one is folded into the next, so no step's loss is lost.
class TrainingTelemetry {
 public:
  TrainingTelemetry(MetricsRegistry* registry, CoordinatorClient* coordinator,
                    WorkerMembership* membership, const std::string& worker,
                    std::function<bool()> draining, absl::Duration report_every = absl::Seconds(2));
  ~TrainingTelemetry();

  void OnStep(const StepRecord& step);
  void OnEval(int64_t steps, const Evaluation& eval);
  // Sends the last report now (at exit) and stops the thread.
  void Finish();

 private:
  void SendReport();

  CoordinatorClient* const coordinator_;
  WorkerMembership* const membership_;
  MetricCounter* steps_ = nullptr;
  MetricCounter* tokens_ = nullptr;
  MetricCounter* pushes_dropped_ = nullptr;
  MetricGauge* train_loss_ = nullptr;
  MetricGauge* val_loss_ = nullptr;
  MetricGauge* val_accuracy_ = nullptr;
  MetricHistogram* pull_ = nullptr;
  MetricHistogram* compute_ = nullptr;
  MetricHistogram* push_ = nullptr;

  absl::Mutex mu_;
  // Reports count from the current registration (the coordinator bounds
  // them by the units it granted that registration): the totals when the
  // worker id last changed, and that id.
  uint64_t counted_id_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_base_ ABSL_GUARDED_BY(mu_) = 0, tokens_base_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_now_ ABSL_GUARDED_BY(mu_) = 0, tokens_now_ ABSL_GUARDED_BY(mu_) = 0;
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;  // Since the last report.
  int64_t loss_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t val_step_ ABSL_GUARDED_BY(mu_) = 0;
  double val_value_ ABSL_GUARDED_BY(mu_) = 0;
  double val_accuracy_value_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t reported_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reported_val_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time reported_at_ ABSL_GUARDED_BY(mu_) = absl::Now();
  std::unique_ptr<BackgroundLoop> reporter_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_TRAINING_TELEMETRY_H_
