#include "common/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spotps {
namespace {

bool IsMetricName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  });
}

bool IsLabelName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  if (name.rfind("__", 0) == 0 || name == "le") return false;  // Reserved.
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

[[noreturn]] void Misuse(const std::string& what) {
  std::fprintf(stderr, "MetricsRegistry misuse: %s\n", what.c_str());
  std::abort();
}

void AtomicAdd(std::atomic<double>& target, double by) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + by, std::memory_order_relaxed)) {
  }
}

// Prometheus spells the special values +Inf, -Inf and NaN.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  // The shortest form that reads back as the same double.
  std::string shortest = absl::StrFormat("%.15g", v);
  if (std::strtod(shortest.c_str(), nullptr) == v) return shortest;
  return absl::StrFormat("%.17g", v);
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelKey(const std::string& name, const MetricLabels& labels) {
  for (const auto& [label, value] : labels) {
    if (!IsLabelName(label)) Misuse(absl::StrCat("bad label name '", label, "' on ", name));
  }
  return RenderMetricLabels(labels);
}

// `{a="x",le="0.5"}` from a rendered label set `{a="x"}` (or "").
std::string WithLe(const std::string& key, const std::string& le) {
  const std::string le_pair = absl::StrCat("le=\"", le, "\"");
  if (key.empty()) return absl::StrCat("{", le_pair, "}");
  return absl::StrCat(key.substr(0, key.size() - 1), ",", le_pair, "}");
}

}  // namespace

std::string RenderMetricLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, labels[i].first, "=\"");
    for (char c : labels[i].second) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '"') {
        out += "\\\"";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\"";
  }
  return out + "}";
}

void MetricCounter::Increment(double by) {
  if (by > 0) AtomicAdd(value_, by);  // A counter never goes down.
}

void MetricCounter::Set(double total) { value_.store(total, std::memory_order_relaxed); }

void MetricGauge::Add(double by) { AtomicAdd(value_, by); }

MetricHistogram::MetricHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void MetricHistogram::Observe(double value) {
  if (std::isnan(value)) return;
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  absl::MutexLock lock(&mu_);
  counts_[bucket] += 1;
  sum_ += value;
  count_ += 1;
}

MetricHistogram::Snapshot MetricHistogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name,
                                                    const std::string& help, Type type) {
  if (!IsMetricName(name)) Misuse(absl::StrCat("bad metric name '", name, "'"));
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    Misuse(absl::StrCat("metric ", name, " registered with two types"));
  }
  return it->second;
}

MetricCounter* MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                        const MetricLabels& labels) {
  const std::string key = LabelKey(name, labels);
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, help, Type::kCounter).counters[key];
  if (slot == nullptr) slot = std::make_unique<MetricCounter>();
  return slot.get();
}

MetricGauge* MetricsRegistry::Gauge(const std::string& name, const std::string& help,
                                    const MetricLabels& labels) {
  const std::string key = LabelKey(name, labels);
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, help, Type::kGauge).gauges[key];
  if (slot == nullptr) slot = std::make_unique<MetricGauge>();
  return slot.get();
}

MetricHistogram* MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                            const std::vector<double>& bounds,
                                            const MetricLabels& labels) {
  if (bounds.empty() || !std::is_sorted(bounds.begin(), bounds.end()) ||
      std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end()) {
    Misuse(absl::StrCat("histogram ", name, " needs strictly ascending bounds"));
  }
  const std::string key = LabelKey(name, labels);
  absl::MutexLock lock(&mu_);
  Family& family = FamilyFor(name, help, Type::kHistogram);
  if (family.bounds.empty()) family.bounds = bounds;
  auto& slot = family.histograms[key];
  if (slot == nullptr) slot = std::make_unique<MetricHistogram>(family.bounds);
  return slot.get();
}

void MetricsRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&collect_mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::Render() {
  {
    absl::MutexLock lock(&collect_mu_);
    for (const auto& collect : collectors_) collect();
  }
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) {
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(family.help), "\n");
    switch (family.type) {
      case Type::kCounter:
        absl::StrAppend(&out, "# TYPE ", name, " counter\n");
        for (const auto& [key, c] : family.counters) {
          absl::StrAppend(&out, name, key, " ", FormatValue(c->value()), "\n");
        }
        break;
      case Type::kGauge:
        absl::StrAppend(&out, "# TYPE ", name, " gauge\n");
        for (const auto& [key, g] : family.gauges) {
          absl::StrAppend(&out, name, key, " ", FormatValue(g->value()), "\n");
        }
        break;
      case Type::kHistogram:
        absl::StrAppend(&out, "# TYPE ", name, " histogram\n");
        for (const auto& [key, h] : family.histograms) {
          const MetricHistogram::Snapshot s = h->snapshot();
          for (size_t i = 0; i < s.cumulative.size(); ++i) {
            const std::string le = i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf";
            absl::StrAppend(&out, name, "_bucket", WithLe(key, le), " ",
                            FormatValue(static_cast<double>(s.cumulative[i])), "\n");
          }
          absl::StrAppend(&out, name, "_sum", key, " ", FormatValue(s.sum), "\n");
          absl::StrAppend(&out, name, "_count", key, " ", FormatValue(static_cast<double>(s.count)),
                          "\n");
        }
        break;
    }
  }
  return out;
}

std::vector<double> MetricsRegistry::LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> MetricsRegistry::CountBounds() {
  return {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

}  // namespace spotps
