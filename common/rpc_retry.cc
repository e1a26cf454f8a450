#include "common/rpc_retry.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace spotps {

absl::Duration JitteredBackoff(absl::Duration base) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return base * jitter(rng);
}

absl::Status CallWithRetry(const RetryPolicy& policy, absl::string_view what,
                           const std::function<grpc::Status(grpc::ClientContext*)>& attempt) {
  absl::Duration backoff = policy.initial_backoff;
  grpc::Status status;
  for (int i = 1; i <= policy.max_attempts; ++i) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + policy.deadline));
    status = attempt(&context);
    if (status.ok()) return absl::OkStatus();
    const bool retryable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!retryable || i == policy.max_attempts) break;
    absl::SleepFor(JitteredBackoff(backoff));
    backoff = std::min(backoff * 2, policy.max_backoff);
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

}  // namespace spotps
