#include "tools/ctl/cluster_status.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"

namespace spotps {
namespace {

// A trainer step pushes one gradient to every shard, so the job's step rate
// is the fastest shard's rate, not the sum. A shard that restarted between
// the samples (new incarnation) says nothing about the rate and is left out.
Throughput MeasureThroughput(const std::vector<v1::StatsResponse>& before,
                             const std::vector<v1::StatsResponse>& after, double seconds,
                             int64_t tokens_per_push) {
  Throughput t;
  t.sampled = true;
  t.seconds = seconds;
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    if (before[i].incarnation() != after[i].incarnation()) continue;
    if (after[i].pushes_applied() < before[i].pushes_applied()) continue;
    const double rate = (after[i].pushes_applied() - before[i].pushes_applied()) / seconds;
    t.pushes_per_s = std::max(t.pushes_per_s, rate);
  }
  if (tokens_per_push > 0) {
    t.tokens_per_s = t.pushes_per_s * static_cast<double>(tokens_per_push);
  }
  return t;
}

// A shard list out of shard order would make every client disagree with the
// shards about who owns which partition; say so instead of hiding it.
std::vector<std::string> ShardOrderWarnings(const std::vector<v1::StatsResponse>& shards) {
  std::vector<std::string> warnings;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].shard_index() != i || shards[i].num_shards() != shards.size()) {
      warnings.push_back(absl::StrFormat(
          "--ps entry %d is shard %d of %d, but the list has %d entries in this order", i,
          shards[i].shard_index(), shards[i].num_shards(), shards.size()));
    }
  }
  return warnings;
}

}  // namespace

bool HasCoordinator(const StatusReport& r) { return r.progress.ok(); }

bool NoCoordinator(const StatusReport& r) { return absl::IsUnimplemented(r.progress.status()); }

absl::StatusOr<StatusReport> GatherStatus(Cluster& cluster, const StatusOptions& options) {
  StatusReport report;
  for (size_t i = 0; i < cluster.num_shards(); ++i) {
    report.addresses.push_back(cluster.shard_address(i));
  }
  const absl::Time first_time = absl::Now();
  absl::StatusOr<std::vector<v1::StatsResponse>> first = cluster.Stats();
  if (!first.ok()) return first.status();
  report.shards = *first;
  if (options.sample > absl::ZeroDuration()) {
    absl::SleepFor(options.sample);
    const absl::Time second_time = absl::Now();
    absl::StatusOr<std::vector<v1::StatsResponse>> second = cluster.Stats();
    if (!second.ok()) return second.status();
    report.shards = *second;
    report.throughput = MeasureThroughput(
        *first, *second, absl::ToDoubleSeconds(second_time - first_time), options.tokens_per_push);
  }
  report.warnings = ShardOrderWarnings(report.shards);
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> coordinator =
      CoordinatorClient::Connect(cluster.shard_address(0), options.retry, cluster.security());
  if (!coordinator.ok()) return coordinator.status();
  report.progress = (*coordinator)->Progress();
  return report;
}

}  // namespace spotps
