// What `spotps-ctl status` learns of a running job: every shard's counters,
// the push rate between two samples, and the coordinator's progress.
#ifndef SPOTPS_TOOLS_CTL_CLUSTER_STATUS_H_
#define SPOTPS_TOOLS_CTL_CLUSTER_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster.h"
#include "common/rpc_retry.h"
#include "spotps/v1/coordinator.pb.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

struct StatusOptions {
  absl::Duration sample = absl::Seconds(1);  // Between two Stats; zero: no rate.
  int64_t tokens_per_push = 0;               // Turns pushes/s into tokens/s when > 0.
  RetryPolicy retry;                         // For the coordinator's Progress.
};

struct Throughput {
  bool sampled = false;
  double seconds = 0;  // Between the two samples.
  double pushes_per_s = 0;
  double tokens_per_s = -1;  // -1: --tokens_per_push not given.
};

struct StatusReport {
  std::vector<std::string> addresses;
  std::vector<v1::StatsResponse> shards;  // The later sample.
  std::vector<std::string> warnings;
  Throughput throughput;
  absl::StatusOr<v1::ProgressResponse> progress;  // UNIMPLEMENTED: no coordinator.
};

// Shard 0 answered Progress: the job has a coordinator and it is healthy.
bool HasCoordinator(const StatusReport& r);
// Shard 0 hosts no coordinator (a job without --epochs): nothing is wrong.
bool NoCoordinator(const StatusReport& r);

// Samples every shard's Stats (twice, options.sample apart) and shard 0's
// Progress. Errors only when the shards cannot be read; a failing
// coordinator is reported in StatusReport::progress.
absl::StatusOr<StatusReport> GatherStatus(Cluster& cluster, const StatusOptions& options);

}  // namespace spotps

#endif  // SPOTPS_TOOLS_CTL_CLUSTER_STATUS_H_
