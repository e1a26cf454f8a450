// TrainingHistory: what trainers reported about their training (losses,
// throughput), kept by shard 0 for the status page.
#ifndef SPOTPS_PS_COORDINATION_TRAINING_HISTORY_H_
#define SPOTPS_PS_COORDINATION_TRAINING_HISTORY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "spotps/v1/training_report.pb.h"

namespace spotps {

// The most a report may claim, from what the coordinator knows of its worker.
struct ReportBounds {
  uint64_t max_steps = ~uint64_t{0};
  uint64_t max_tokens = ~uint64_t{0};
};

// One accepted report.
struct TrainingPoint {
  absl::Time time;
  uint64_t worker_id = 0;
  std::string worker;  // The name it registered under.
  uint64_t steps = 0, tokens = 0;
  double train_loss = 0, tokens_per_s = 0;
  // Set when this report carried a validation loss newer than the last.
  bool has_val = false;
  uint64_t val_step = 0;
  double val_loss = 0;
  double val_accuracy = -1;  // Classification only; -1 when not reported.
};

// Owns the newest `capacity` reports of all trainers and each trainer's
// latest. Promises: thread-safe; a report is validated whole (finite,
// non-negative, in range, counts never going backwards for a worker) and a
// refused one changes nothing; memory stays bounded by `capacity` and
// `max_workers` (the oldest worker's latest is forgotten first).
class TrainingHistory {
 public:
  explicit TrainingHistory(size_t capacity = 4096, size_t max_workers = 4096)
      : capacity_(capacity), max_workers_(max_workers) {}

  // INVALID_ARGUMENT (with what is wrong) for a bad report, one beyond
  // `bounds` among them.
  absl::Status Record(const v1::TrainingReportRequest& report, const std::string& worker,
                      absl::Time now, const ReportBounds& bounds = {});

  std::vector<TrainingPoint> Points() const;         // Oldest first.
  std::map<uint64_t, TrainingPoint> Latest() const;  // By worker id.
  uint64_t accepted() const;

 private:
  const size_t capacity_, max_workers_;
  mutable absl::Mutex mu_;
  std::deque<TrainingPoint> points_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, TrainingPoint> latest_ ABSL_GUARDED_BY(mu_);
  uint64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spotps

#endif  // SPOTPS_PS_COORDINATION_TRAINING_HISTORY_H_
