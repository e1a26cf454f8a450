#include "common/metrics_registry.h"

#include <prometheus/check_names.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "absl/strings/str_replace.h"

namespace spotps {
namespace {

[[noreturn]] void Misuse(const std::string& what, const std::string& name) {
  std::fprintf(stderr, "MetricsRegistry: %s: %s\n", what.c_str(), name.c_str());
  std::abort();
}

// The text format escapes backslashes and newlines in HELP; prometheus-cpp
// 1.0 (Debian 12) writes help verbatim, so a newline would end the line.
std::string EscapeHelp(const std::string& help) {
  return absl::StrReplaceAll(help, {{"\\", "\\\\"}, {"\n", "\\n"}});
}

prometheus::Labels ToLabels(const MetricLabels& labels) {
  return prometheus::Labels(labels.begin(), labels.end());
}

bool ByLabels(const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) {
  auto key = [](const prometheus::ClientMetric& m) {
    std::vector<std::pair<std::string, std::string>> k;
    for (const prometheus::ClientMetric::Label& l : m.label) k.emplace_back(l.name, l.value);
    return k;
  };
  return key(a) < key(b);
}

}  // namespace

void MetricCounter::Increment(double by) { counter_->Increment(by); }

void MetricCounter::Set(double total) {
  const double by = total - counter_->Value();
  if (by > 0) counter_->Increment(by);
}

double MetricCounter::value() const { return counter_->Value(); }

void MetricGauge::Set(double value) { gauge_->Set(value); }
void MetricGauge::Add(double by) { gauge_->Increment(by); }
double MetricGauge::value() const { return gauge_->Value(); }

void MetricHistogram::Observe(double value) {
  if (!std::isnan(value)) histogram_->Observe(value);
}

MetricsRegistry::MetricsRegistry() : registry_(std::make_unique<prometheus::Registry>()) {}
MetricsRegistry::~MetricsRegistry() = default;

void MetricsRegistry::CheckSeries(const std::string& name, const MetricLabels& labels, Type type) {
  if (!prometheus::CheckMetricName(name)) Misuse("bad metric name", name);
  for (const auto& [label, value] : labels) {
    // "le" and "quantile" belong to histograms and summaries.
    if (!prometheus::CheckLabelName(label) || label == "le" || label == "quantile") {
      Misuse("bad label name", label);
    }
  }
  auto [it, added] = types_.emplace(name, type);
  if (!added && it->second != type) Misuse("one name with two types", name);
}

MetricCounter* MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                        const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  CheckSeries(name, labels, Type::kCounter);
  std::unique_ptr<MetricCounter>& c = counters_[{name, labels}];
  if (c == nullptr) {
    auto& family =
        prometheus::BuildCounter().Name(name).Help(EscapeHelp(help)).Register(*registry_);
    c = std::make_unique<MetricCounter>(&family.Add(ToLabels(labels)));
  }
  return c.get();
}

MetricGauge* MetricsRegistry::Gauge(const std::string& name, const std::string& help,
                                    const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  CheckSeries(name, labels, Type::kGauge);
  std::unique_ptr<MetricGauge>& g = gauges_[{name, labels}];
  if (g == nullptr) {
    auto& family = prometheus::BuildGauge().Name(name).Help(EscapeHelp(help)).Register(*registry_);
    g = std::make_unique<MetricGauge>(&family.Add(ToLabels(labels)));
  }
  return g.get();
}

MetricHistogram* MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                            const std::vector<double>& bounds,
                                            const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  CheckSeries(name, labels, Type::kHistogram);
  std::unique_ptr<MetricHistogram>& h = histograms_[{name, labels}];
  if (h == nullptr) {
    auto& family =
        prometheus::BuildHistogram().Name(name).Help(EscapeHelp(help)).Register(*registry_);
    h = std::make_unique<MetricHistogram>(
        &family.Add(ToLabels(labels), prometheus::Histogram::BucketBoundaries(bounds)));
  }
  return h.get();
}

void MetricsRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&collect_mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::Render() {
  {
    absl::MutexLock lock(&collect_mu_);
    for (const std::function<void()>& collect : collectors_) collect();
  }
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  // A stable order, for people and diffs; Prometheus needs none.
  std::sort(families.begin(), families.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (prometheus::MetricFamily& f : families) {
    std::sort(f.metric.begin(), f.metric.end(), ByLabels);
  }
  return prometheus::TextSerializer().Serialize(families);
}

std::vector<double> MetricsRegistry::LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
std::vector<double> MetricsRegistry::CountBounds() {
  return {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

}  // namespace spotps
