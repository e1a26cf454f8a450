// Bounded retries with jittered exponential backoff for one gRPC call.
#ifndef SPOTPS_COMMON_RPC_RETRY_H_
#define SPOTPS_COMMON_RPC_RETRY_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/retry_policy.h"

namespace spotps {


// Runs `attempt` with a fresh context carrying the deadline until it
// succeeds, fails with a code other than UNAVAILABLE or DEADLINE_EXCEEDED,
// or max_attempts ran out. The returned status keeps the code and prefixes
// the message with `what` ("shard 1 (host:port) Push").
absl::Status CallWithRetry(const RetryPolicy& policy, absl::string_view what,
                           const std::function<grpc::Status(grpc::ClientContext*)>& attempt);

// `base` scaled by a random factor in [0.5, 1), so retrying clients spread out.
absl::Duration JitteredBackoff(absl::Duration base);

}  // namespace spotps

#endif  // SPOTPS_COMMON_RPC_RETRY_H_
