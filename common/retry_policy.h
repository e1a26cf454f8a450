// How hard a client tries one RPC: the deadline of each attempt and the
// bounded, jittered exponential backoff between attempts. Kept apart from
// rpc_retry.h so that public headers need no gRPC header.
#ifndef SPOTPS_COMMON_RETRY_POLICY_H_
#define SPOTPS_COMMON_RETRY_POLICY_H_

#include "absl/time/time.h"

namespace spotps {

struct RetryPolicy {
  absl::Duration deadline = absl::Seconds(60);  // Per attempt.
  int max_attempts = 6;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(3);
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_RETRY_POLICY_H_
