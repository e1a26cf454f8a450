// MetricsRegistry: a process's counters, gauges and histograms, with
// labels, rendered in the Prometheus text exposition format 0.0.4.
//
// Conventions (https://prometheus.io/docs/practices/naming/): every name
// starts with `spotps_`, counters end in `_total`, durations are in seconds
// (`_seconds`), sizes in bytes (`_bytes`).
#ifndef SPOTPS_COMMON_METRICS_REGISTRY_H_
#define SPOTPS_COMMON_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace spotps {

// Label name/value pairs of one time series, e.g. {{"reason", "too_stale"}}.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up (restarts from 0 with the process).
class MetricCounter {
 public:
  void Increment(double by = 1);
  // For counters that mirror a count someone else keeps (the store's
  // statistics): the source must never go down.
  void Set(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down.
class MetricGauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double by);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into cumulative buckets (upper bounds, ascending),
// with their sum and count.
class MetricHistogram {
 public:
  explicit MetricHistogram(std::vector<double> bounds);
  void Observe(double value);
  // Bucket counts (cumulative, one per bound then +Inf), sum, count.
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // Per bucket, +Inf last.
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// Owns every metric of a process. Promises: thread-safe; a metric's pointer
// stays valid as long as the registry; asking again for the same name and
// labels returns the same metric; names and label names are checked
// (a wrong one, or one name with two types, is a programming error and
// aborts with a message); label values and help text are escaped.
class MetricsRegistry {
 public:
  MetricCounter* Counter(const std::string& name, const std::string& help,
                         const MetricLabels& labels = {});
  MetricGauge* Gauge(const std::string& name, const std::string& help,
                     const MetricLabels& labels = {});
  // `bounds`: ascending upper bounds (+Inf is implied); only the first
  // registration's bounds count.
  MetricHistogram* Histogram(const std::string& name, const std::string& help,
                             const std::vector<double>& bounds, const MetricLabels& labels = {});

  // `collect` runs at every Render() first, to update metrics that mirror
  // state others own (e.g. gauges read from the store).
  void AddCollector(std::function<void()> collect);

  // The whole registry, text format 0.0.4, families sorted by name.
  std::string Render();

  // Bounds for latencies from 1 ms to 60 s, and for small counts 0..1024.
  static std::vector<double> LatencyBounds();
  static std::vector<double> CountBounds();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> bounds;
    // Keyed by the rendered label set, so rendering is ordered and stable.
    std::map<std::string, std::unique_ptr<MetricCounter>> counters;
    std::map<std::string, std::unique_ptr<MetricGauge>> gauges;
    std::map<std::string, std::unique_ptr<MetricHistogram>> histograms;
  };
  Family& FamilyFor(const std::string& name, const std::string& help, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex collect_mu_;  // One Render at a time runs the collectors.
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(collect_mu_);
  absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
};

// `{a="x",b="y"}` (empty for no labels), values escaped per the format.
std::string RenderMetricLabels(const MetricLabels& labels);

}  // namespace spotps

#endif  // SPOTPS_COMMON_METRICS_REGISTRY_H_
