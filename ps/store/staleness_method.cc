#include "ps/store/staleness_method.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace spotps {

absl::StatusOr<StalenessMethod> ParseStalenessMethod(absl::string_view name) {
  if (name == "none") return StalenessMethod::kNone;
  if (name == "lr") return StalenessMethod::kLrScale;
  if (name == "dc") return StalenessMethod::kDelayCompensated;
  if (name == "momentum") return StalenessMethod::kMomentum;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown staleness method '", name, "' (expected none, lr, dc or momentum)"));
}

absl::Status ParseStalenessSpec(absl::string_view spec, StalenessConfig* config) {
  StalenessConfig parsed = *config;
  parsed.method = StalenessMethod::kNone;
  parsed.average = false;
  parsed.fresh = false;
  parsed.worker_warmup = false;
  parsed.delayed_nesterov = false;
  if (spec == "delayed") {
    parsed.delayed_nesterov = true;
    *config = parsed;
    return absl::OkStatus();
  }
  bool said_avg = false;
  bool have_rule = false;
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, '+');
  for (absl::string_view part : parts) {
    if (part == "avg" && !said_avg) {
      parsed.average = said_avg = true;
      continue;
    }
    if (part == "fresh" && !parsed.fresh) {
      parsed.average = parsed.fresh = true;
      continue;
    }
    if (part == "warmup" && !parsed.worker_warmup) {
      parsed.worker_warmup = true;
      continue;
    }
    absl::StatusOr<StalenessMethod> rule = ParseStalenessMethod(part);
    if (!rule.ok() || have_rule) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad --staleness_method '", spec,
          "': expected one of none, lr, dc, momentum, optionally joined by '+' with avg, "
          "fresh and warmup (each at most once), e.g. dc+avg or avg+fresh; or delayed alone "
          "(local mode)"));
    }
    parsed.method = *rule;
    have_rule = true;
  }
  *config = parsed;
  return absl::OkStatus();
}

std::string StalenessMethodName(StalenessMethod method) {
  switch (method) {
    case StalenessMethod::kNone:
      return "none";
    case StalenessMethod::kLrScale:
      return "lr";
    case StalenessMethod::kDelayCompensated:
      return "dc";
    case StalenessMethod::kMomentum:
      return "momentum";
  }
  return "unknown";
}

std::string DescribeStaleness(const StalenessConfig& config) {
  if (config.delayed_nesterov) return "delayed(sum/k on arrival)";
  std::string out = StalenessMethodName(config.method);
  if (config.method == StalenessMethod::kDelayCompensated) {
    out = absl::StrCat("dc(lambda=", config.dc_lambda, ")");
  }
  if (config.average) {
    const std::string k =
        config.average_pushes > 0 ? absl::StrCat(config.average_pushes) : std::string("live");
    // Local rounds wait for a share of a round too (LocalRoundWait), which
    // a start line should not hide behind 1000ms.
    const std::string wait = config.share_of_k ? absl::StrCat("max(", config.average_wait_ms,
                                                              "ms,round/", kRoundWaitDivisor, ")")
                                               : absl::StrCat(config.average_wait_ms, "ms");
    absl::StrAppend(&out, "+avg(k=", k, ",wait=", wait, config.share_of_k ? ",sum/k)" : ")");
    if (config.fresh) absl::StrAppend(&out, "+fresh");
  }
  if (config.worker_warmup) {
    absl::StrAppend(&out, "+warmup(", config.warmup_steps_per_worker, "/worker)");
  }
  return out;
}

absl::Status ValidateStalenessConfig(const StalenessConfig& config, bool adamw) {
  if (!std::isfinite(config.dc_lambda) || config.dc_lambda < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("dc_lambda must be finite and >= 0, got ", config.dc_lambda));
  }
  if (config.method == StalenessMethod::kDelayCompensated && !adamw) {
    return absl::InvalidArgumentError(
        "--staleness_method=dc needs --optimizer=adamw: it reads the last update back from "
        "AdamW's moments");
  }
  if (config.delayed_nesterov && !config.share_of_k) {
    return absl::InvalidArgumentError(
        "--staleness_method=delayed is for --consistency=local:H: it applies pseudo-gradients");
  }
  if (config.delayed_nesterov && adamw) {
    return absl::InvalidArgumentError(
        "--staleness_method=delayed needs --optimizer=sgd with Nesterov momentum (local mode's "
        "default outer optimizer), not adamw");
  }
  if (config.average_pushes < 0 || config.average_pushes > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "average_pushes must be 0 (live workers) to 1024, got ", config.average_pushes));
  }
  if (!(config.average_wait_ms > 0) || config.average_wait_ms > 60'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("average_wait_ms must be in (0, 60000], got ", config.average_wait_ms));
  }
  if (config.warmup_steps_per_worker < 1 || config.warmup_steps_per_worker > 1'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "warmup_steps_per_worker must be 1 to 1000000, got ", config.warmup_steps_per_worker));
  }
  return absl::OkStatus();
}

int EstimatedWorkers(const AsyncView& view) {
  if (view.live_workers > 0) return view.live_workers;
  return std::max(1, static_cast<int>(std::lround(1.0 + view.mean_staleness)));
}

float AsyncBeta1(float beta1, double mean_staleness) {
  const double s = std::max(0.0, mean_staleness);
  return static_cast<float>(std::max(0.0, static_cast<double>(beta1) - s / (1.0 + s)));
}

absl::Duration LocalRoundWait(const StalenessConfig& config, absl::Duration median_round) {
  return std::max(absl::Milliseconds(config.average_wait_ms),
                  std::min(median_round / kRoundWaitDivisor, kMaxRoundWait));
}

AveragingWaits AveragingWaitsFor(const StalenessConfig& config, absl::Duration median_round) {
  if (!config.share_of_k) {
    const absl::Duration wait = absl::Milliseconds(config.average_wait_ms);
    return AveragingWaits{wait, wait};
  }
  const absl::Duration wait = LocalRoundWait(config, median_round);
  return AveragingWaits{wait, wait + std::min(median_round, kMaxRoundWait)};
}

StalenessStep PlanStalenessStep(const StalenessConfig& config, double lr, uint64_t staleness) {
  AsyncView view;
  view.staleness = staleness;
  return PlanStalenessStep(config, lr, -1.0f, view);
}

StalenessStep PlanStalenessStep(const StalenessConfig& config, double lr, float beta1,
                                const AsyncView& view) {
  StalenessStep step;
  step.lr = lr;
  switch (config.method) {
    case StalenessMethod::kNone:
      break;
    case StalenessMethod::kLrScale:
      step.lr = lr / (1.0 + static_cast<double>(view.staleness));
      break;
    case StalenessMethod::kDelayCompensated:
      step.compensation = config.dc_lambda * static_cast<float>(view.staleness);
      break;
    case StalenessMethod::kMomentum:
      if (beta1 >= 0.0f) step.beta1 = AsyncBeta1(beta1, view.mean_staleness);
      break;
  }
  if (config.worker_warmup) {
    const double length =
        static_cast<double>(config.warmup_steps_per_worker) * EstimatedWorkers(view);
    step.lr *= std::min(1.0, static_cast<double>(view.updates_done + 1) / length);
  }
  return step;
}

}  // namespace spotps
