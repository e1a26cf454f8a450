#include "ps/coordination/training_history.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace spotps {
namespace {

// A byte-level or GPT-2 model starts near ln(vocab) < 11; anything far
// beyond is a broken report, not a loss.
constexpr double kMaxLoss = 1e4;
constexpr double kMaxTokensPerSecond = 1e12;

absl::Status CheckValue(const char* what, double value, double max) {
  if (!std::isfinite(value) || value < 0 || value > max) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %g is not a finite number in [0, %g]", what, value, max));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainingHistory::Record(const v1::TrainingReportRequest& report,
                                     const std::string& worker, absl::Time now,
                                     const ReportBounds& bounds) {
  if (report.steps() > bounds.max_steps || report.tokens() > bounds.max_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d reports %d steps and %d tokens, more than the %d steps and %d tokens its "
        "units so far allow",
        report.worker_id(), report.steps(), report.tokens(), bounds.max_steps,
        bounds.max_tokens));
  }
  if (absl::Status s = CheckValue("train_loss", report.train_loss(), kMaxLoss); !s.ok()) return s;
  if (absl::Status s = CheckValue("tokens_per_s", report.tokens_per_s(), kMaxTokensPerSecond);
      !s.ok()) {
    return s;
  }
  if (report.val_step() > 0) {
    if (absl::Status s = CheckValue("val_loss", report.val_loss(), kMaxLoss); !s.ok()) return s;
    if (report.has_val_accuracy()) {
      if (absl::Status s = CheckValue("val_accuracy", report.val_accuracy(), 1.0); !s.ok()) {
        return s;
      }
    }
    if (report.val_step() > report.steps()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "val_step %d is beyond the report's steps %d", report.val_step(), report.steps()));
    }
  }
  absl::MutexLock lock(&mu_);
  auto previous = latest_.find(report.worker_id());
  if (previous != latest_.end()) {
    const TrainingPoint& p = previous->second;
    if (report.steps() < p.steps || report.tokens() < p.tokens || report.val_step() < p.val_step) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "counts went backwards for worker %d (steps %d < %d, tokens %d < %d or val_step %d < "
          "%d)",
          report.worker_id(), report.steps(), p.steps, report.tokens(), p.tokens, report.val_step(),
          p.val_step));
    }
  }
  TrainingPoint point;
  point.time = now;
  point.worker_id = report.worker_id();
  point.worker = worker;
  point.steps = report.steps();
  point.tokens = report.tokens();
  point.train_loss = report.train_loss();
  point.tokens_per_s = report.tokens_per_s();
  point.val_step = report.val_step();
  point.val_loss = report.val_loss();
  point.val_accuracy = report.has_val_accuracy() ? report.val_accuracy() : -1;
  point.has_val = report.val_step() > 0 &&
                  (previous == latest_.end() || report.val_step() > previous->second.val_step);
  if (previous == latest_.end() && latest_.size() >= max_workers_) {
    // Forget the worker that reported least recently.
    auto oldest = latest_.begin();
    for (auto it = latest_.begin(); it != latest_.end(); ++it) {
      if (it->second.time < oldest->second.time) oldest = it;
    }
    latest_.erase(oldest);
  }
  latest_[point.worker_id] = point;
  points_.push_back(std::move(point));
  while (points_.size() > capacity_) points_.pop_front();
  accepted_ += 1;
  return absl::OkStatus();
}

std::vector<TrainingPoint> TrainingHistory::Points() const {
  absl::MutexLock lock(&mu_);
  return {points_.begin(), points_.end()};
}

std::map<uint64_t, TrainingPoint> TrainingHistory::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

uint64_t TrainingHistory::accepted() const {
  absl::MutexLock lock(&mu_);
  return accepted_;
}

}  // namespace spotps
