#include "trainer/elastic/training_telemetry.h"

#include <cmath>

namespace spotps {

TrainingTelemetry::TrainingTelemetry(MetricsRegistry* registry, CoordinatorClient* coordinator,
                                     WorkerMembership* membership, const std::string& worker,
                                     std::function<bool()> draining, absl::Duration report_every)
    : coordinator_(coordinator), membership_(membership) {
  if (registry != nullptr) {
    const MetricLabels w = {{"worker", worker}};
    steps_ = registry->Counter("spotps_trainer_steps_total", "Training steps done.", w);
    tokens_ = registry->Counter("spotps_trainer_tokens_total", "Tokens trained on.", w);
    pushes_dropped_ = registry->Counter(
        "spotps_trainer_pushes_dropped_total",
        "Gradients the shards refused as too stale or based on lost versions.", w);
    train_loss_ =
        registry->Gauge("spotps_trainer_train_loss", "Training loss of the last step.", w);
    val_loss_ = registry->Gauge("spotps_trainer_val_loss",
                                "Validation loss of the last evaluation (--eval_every).", w);
    val_accuracy_ = registry->Gauge(
        "spotps_trainer_val_accuracy",
        "Validation accuracy of the last evaluation (classification; -1 for lm).", w);
    const std::string help =
        "Time of each step's phases: pull and push (overlapped with "
        "compute unless --overlap=false) and compute.";
    pull_ = registry->Histogram("spotps_trainer_step_phase_seconds", help,
                                MetricsRegistry::LatencyBounds(), {w[0], {"phase", "pull"}});
    compute_ = registry->Histogram("spotps_trainer_step_phase_seconds", help,
                                   MetricsRegistry::LatencyBounds(), {w[0], {"phase", "compute"}});
    push_ = registry->Histogram("spotps_trainer_step_phase_seconds", help,
                                MetricsRegistry::LatencyBounds(), {w[0], {"phase", "push"}});
    MetricGauge* draining_gauge = registry->Gauge(
        "spotps_trainer_draining", "1 once a drain began (SIGTERM/SIGINT or a spot notice).", w);
    MetricCounter* drains = registry->Counter("spotps_trainer_drain_events_total",
                                              "Drains begun (at most one per process).", w);
    registry->AddCollector([draining, draining_gauge, drains] {
      const bool now = draining && draining();
      draining_gauge->Set(now ? 1 : 0);
      drains->Set(now ? 1 : 0);
    });
  }
  if (coordinator_ != nullptr && membership_ != nullptr) {
    reporter_ = std::make_unique<BackgroundLoop>(report_every, [this] { SendReport(); });
    reporter_->Start();
  }
}

TrainingTelemetry::~TrainingTelemetry() { Finish(); }

void TrainingTelemetry::OnStep(const StepRecord& step) {
  if (steps_ != nullptr) {
    steps_->Set(static_cast<double>(step.steps));
    tokens_->Set(static_cast<double>(step.tokens));
    pushes_dropped_->Set(static_cast<double>(step.pushes_dropped));
    train_loss_->Set(step.loss);
    compute_->Observe(step.compute_s);
    if (step.pull_s > 0) pull_->Observe(step.pull_s);
    if (step.push_s > 0) push_->Observe(step.push_s);
  }
  absl::MutexLock lock(&mu_);
  if (membership_ != nullptr && membership_->worker_id() != counted_id_) {
    // Registered anew (a lost lease): count from here.
    counted_id_ = membership_->worker_id();
    steps_base_ = steps_now_;
    tokens_base_ = tokens_now_;
    reported_tokens_ = tokens_now_;
  }
  steps_now_ = step.steps;
  tokens_now_ = step.tokens;
  if (std::isfinite(step.loss)) {  // The coordinator refuses what is not.
    loss_sum_ += step.loss;
    loss_count_ += 1;
  }
}

void TrainingTelemetry::OnEval(int64_t steps, const Evaluation& eval) {
  if (val_loss_ != nullptr) {
    val_loss_->Set(eval.loss);
    val_accuracy_->Set(eval.accuracy);
  }
  if (!std::isfinite(eval.loss)) return;
  absl::MutexLock lock(&mu_);
  val_step_ = steps;
  val_value_ = eval.loss;
  val_accuracy_value_ = eval.accuracy;
}

void TrainingTelemetry::Finish() {
  if (reporter_ == nullptr) return;
  reporter_->Stop();
  reporter_.reset();
  SendReport();
}

void TrainingTelemetry::SendReport() {
  v1::TrainingReportRequest report;
  double sent_sum = 0;
  int64_t sent_count = 0, sent_tokens = 0, sent_val_step = 0;
  {
    absl::MutexLock lock(&mu_);
    if (loss_count_ == 0 && val_step_ == reported_val_step_) return;  // Nothing new.
    const double seconds = absl::ToDoubleSeconds(absl::Now() - reported_at_);
    if (membership_->worker_id() != counted_id_) return;  // Until a step under the new id.
    report.set_worker_id(counted_id_);
    report.set_steps(static_cast<uint64_t>(steps_now_ - steps_base_));
    report.set_tokens(static_cast<uint64_t>(tokens_now_ - tokens_base_));
    report.set_train_loss(loss_count_ > 0 ? loss_sum_ / loss_count_ : 0.0);
    report.set_tokens_per_s(seconds > 0 ? (tokens_now_ - reported_tokens_) / seconds : 0.0);
    report.set_val_step(static_cast<uint64_t>(std::max<int64_t>(0, val_step_ - steps_base_)));
    report.set_val_loss(val_value_);
    if (val_accuracy_value_ >= 0) report.set_val_accuracy(val_accuracy_value_);
    sent_sum = loss_sum_;
    sent_count = loss_count_;
    sent_tokens = tokens_now_;
    sent_val_step = val_step_;
  }
  // Not under the lock: the training thread never waits for an RPC.
  if (!coordinator_->Report(report).ok()) return;  // The next report covers this window.
  absl::MutexLock lock(&mu_);
  // Steps that finished while the report was on its way stay for the next.
  loss_sum_ -= sent_sum;
  loss_count_ -= sent_count;
  reported_tokens_ = sent_tokens;
  reported_val_step_ = sent_val_step;
  reported_at_ = absl::Now();
}

}  // namespace spotps
