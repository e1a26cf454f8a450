// Bounded retries with jittered exponential backoff for one gRPC call.
#ifndef SPOTPS_CLIENT_RPC_RETRY_H_
#define SPOTPS_CLIENT_RPC_RETRY_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace spotps {

struct RetryPolicy {
  absl::Duration deadline = absl::Seconds(60);  // Per attempt.
  int max_attempts = 6;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(3);
};

// Runs `attempt` with a fresh context carrying the deadline until it
// succeeds, fails with a code other than UNAVAILABLE or DEADLINE_EXCEEDED,
// or max_attempts ran out. The returned status keeps the code and prefixes
// the message with `what` ("shard 1 (host:port) Push").
absl::Status CallWithRetry(const RetryPolicy& policy, absl::string_view what,
                           const std::function<grpc::Status(grpc::ClientContext*)>& attempt);

// `base` scaled by a random factor in [0.5, 1), so retrying clients spread out.
absl::Duration JitteredBackoff(absl::Duration base);

}  // namespace spotps

#endif  // SPOTPS_CLIENT_RPC_RETRY_H_
