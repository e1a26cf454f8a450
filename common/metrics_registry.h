// MetricsRegistry: a process's counters, gauges and histograms, with
// labels, kept in prometheus-cpp's registry and rendered by its text
// serializer (exposition format 0.0.4). Serving them is HttpEndpoint's job.
//
// Conventions (https://prometheus.io/docs/practices/naming/): every name
// starts with `spotps_`, counters end in `_total`, durations are in seconds
// (`_seconds`), sizes in bytes (`_bytes`).
#ifndef SPOTPS_COMMON_METRICS_REGISTRY_H_
#define SPOTPS_COMMON_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace spotps {

// Label name/value pairs of one time series, e.g. {{"reason", "too_stale"}}.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up (restarts from 0 with the process); a negative
// increment changes nothing.
class MetricCounter {
 public:
  explicit MetricCounter(prometheus::Counter* counter) : counter_(counter) {}
  void Increment(double by = 1);
  // For counters that mirror a count someone else keeps (the store's
  // statistics), from one thread at a time (a collector): the source must
  // never go down.
  void Set(double total);
  double value() const;

 private:
  prometheus::Counter* const counter_;
};

// A value that goes up and down.
class MetricGauge {
 public:
  explicit MetricGauge(prometheus::Gauge* gauge) : gauge_(gauge) {}
  void Set(double value);
  void Add(double by);
  double value() const;

 private:
  prometheus::Gauge* const gauge_;
};

// Counts observations into cumulative buckets, with their sum and count; a
// NaN is not an observation.
class MetricHistogram {
 public:
  explicit MetricHistogram(prometheus::Histogram* histogram) : histogram_(histogram) {}
  void Observe(double value);

 private:
  prometheus::Histogram* const histogram_;
};

// Owns every metric of a process. Promises: thread-safe; a metric's pointer
// stays valid as long as the registry; asking again for the same name and
// labels returns the same metric; names and label names are checked
// (a wrong one, or one name with two types, is a programming error and
// aborts with a message); label values and help text are escaped; families
// render sorted by name and series by labels.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();

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

  // The whole registry, text format 0.0.4.
  std::string Render();

  // Bounds for latencies from 1 ms to 60 s, and for small counts 0..1024.
  static std::vector<double> LatencyBounds();
  static std::vector<double> CountBounds();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  using SeriesKey = std::pair<std::string, MetricLabels>;
  // Checks the name, labels and type (aborting on misuse) and remembers the
  // name's type.
  void CheckSeries(const std::string& name, const MetricLabels& labels, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex collect_mu_;  // One Render at a time runs the collectors.
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(collect_mu_);
  absl::Mutex mu_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::map<std::string, Type> types_ ABSL_GUARDED_BY(mu_);
  std::map<SeriesKey, std::unique_ptr<MetricCounter>> counters_ ABSL_GUARDED_BY(mu_);
  std::map<SeriesKey, std::unique_ptr<MetricGauge>> gauges_ ABSL_GUARDED_BY(mu_);
  std::map<SeriesKey, std::unique_ptr<MetricHistogram>> histograms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_METRICS_REGISTRY_H_
