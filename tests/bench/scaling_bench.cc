// spotps-bench-scaling: how many trainers a shard can feed. N trainers (one
// thread and one Cluster client each, in this process) run the trainer's
// overlapped loop against S local spotps-ps processes, with the forward and
// backward pass replaced by a fixed delay: per step, push the previous
// gradient and pull the weights (real BF16 pulls and pushes of a model of a
// real preset's size, real AdamW applies on the shards) while "computing".
// For each S and N: updates/s, updates/s and wire bytes/s per shard, and the
// efficiency throughput(N) / (N x throughput(1)) against the 1-trainer run
// on the same shards; a shard count saturates at the first N whose
// efficiency falls below 0.9. Loopback, no link cap (it does not use the
// network-namespace harness).
// Last line: scaling: efficiency_at_8=E shards=S model=M (E is the best
// efficiency at N=8, or at the largest N when 8 is not measured, over the
// shard counts; S the fewest shards that reach it).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cluster.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/transport_args.h"
#include "common/usage_problems.h"
#include "tests/support/child_process.h"
#include "tests/support/count_list.h"
#include "trainer/model/gpt_config.h"

ABSL_FLAG(std::string, model, "small", "Model preset whose parameter count is moved.");
ABSL_FLAG(std::string, trainers, "1,2,4,8", "Trainer counts N (e.g. 1,2,4,8,16).");
ABSL_FLAG(std::string, shards, "1,2", "Shard counts S (e.g. 1,2,4).");
ABSL_FLAG(int, compute_ms, 1000, "The fixed delay that stands in for a compute step.");
ABSL_FLAG(int, steps, 4, "Timed steps per trainer (after an untimed full pull).");

namespace spotps {
namespace {

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

// The model as the shards see it: the preset's parameter count as one
// tensor per 4 MiB-sized row block (the partitioning is by size anyway).
ModelLayout LayoutOfPreset(const GptConfig& config) {
  int64_t left = GptParameterCount(config);
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  for (int i = 0; left > 0; ++i) {
    const int64_t n = std::min<int64_t>(left, int64_t{1} << 20);
    tensors.push_back({absl::StrCat("block", i), {n}});
    left -= n;
  }
  return *ModelLayout::Create(std::move(tensors));
}

struct TrainerTally {
  int64_t updates = 0;
  double bytes = 0;  // Pull + push payload.
};

// One trainer's overlapped loop: while the delay runs, push the previous
// step's gradient and pull the weights the next step will use.
absl::StatusOr<TrainerTally> TrainerLoop(Cluster& cluster, absl::Span<const float> gradient,
                                         int steps, absl::Duration compute,
                                         const absl::Notification& go) {
  TrainerTally tally;
  WeightSnapshot weights;
  std::vector<uint64_t> base;
  if (absl::Status s = cluster.Pull(v1::DTYPE_BF16, &weights); !s.ok()) return s;
  go.WaitForNotification();
  for (int step = 0; step < steps; ++step) {
    const absl::Time deadline = absl::Now() + compute;
    if (!base.empty()) {
      auto pushed = cluster.Push(gradient, base, v1::DTYPE_BF16);
      if (!pushed.ok()) return pushed.status();
      tally.updates += 1;
      tally.bytes += static_cast<double>(pushed->bytes_sent);
    }
    base = weights.versions;
    if (absl::Status s = cluster.Pull(v1::DTYPE_BF16, &weights); !s.ok()) return s;
    tally.bytes += static_cast<double>(weights.bytes_received);
    absl::SleepFor(deadline - absl::Now());  // The rest of the "compute".
  }
  auto pushed = cluster.Push(gradient, base, v1::DTYPE_BF16);
  if (!pushed.ok()) return pushed.status();
  tally.updates += 1;
  tally.bytes += static_cast<double>(pushed->bytes_sent);
  return tally;
}

struct Point {
  int trainers;
  double updates_per_s, bytes_per_s;
};

absl::StatusOr<Point> Measure(const std::string& addresses, int trainers,
                              absl::Span<const float> gradient) {
  std::vector<std::unique_ptr<Cluster>> clients;
  for (int t = 0; t < trainers; ++t) {
    auto cluster = Cluster::Connect(addresses);
    if (!cluster.ok()) return cluster.status();
    if (absl::Status s = (*cluster)->FetchLayout(); !s.ok()) return s;
    clients.push_back(*std::move(cluster));
  }
  const int steps = absl::GetFlag(FLAGS_steps);
  const absl::Duration compute = absl::Milliseconds(absl::GetFlag(FLAGS_compute_ms));
  std::vector<absl::StatusOr<TrainerTally>> tallies(trainers, TrainerTally{});
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int t = 0; t < trainers; ++t) {
    threads.emplace_back(
        [&, t] { tallies[t] = TrainerLoop(*clients[t], gradient, steps, compute, go); });
  }
  absl::SleepFor(absl::Milliseconds(200));  // Every first (full) pull done, roughly.
  const absl::Time start = absl::Now();
  go.Notify();
  for (std::thread& t : threads) t.join();
  const double seconds = Seconds(start);
  TrainerTally sum;
  for (auto& tally : tallies) {
    if (!tally.ok()) return tally.status();
    sum.updates += tally->updates;
    sum.bytes += tally->bytes;
  }
  return Point{trainers, sum.updates / seconds, sum.bytes / seconds};
}

// Every problem with the flags, before anything starts.
UsageProblems FlagProblems() {
  UsageProblems problems;
  problems.Check(GptConfigFromPreset(absl::GetFlag(FLAGS_model)).status(), "--model");
  problems.Check(testing::ParseCountList(absl::GetFlag(FLAGS_trainers)).status(), "--trainers");
  problems.Check(testing::ParseCountList(absl::GetFlag(FLAGS_shards)).status(), "--shards");
  problems.Require(absl::GetFlag(FLAGS_compute_ms) >= 0, "--compute_ms must not be negative");
  problems.Require(absl::GetFlag(FLAGS_steps) >= 1, "--steps must be at least 1");
  return problems;
}

int Run() {
  // FlagProblems found none of these wanting.
  auto config = GptConfigFromPreset(absl::GetFlag(FLAGS_model));
  auto trainer_counts = testing::ParseCountList(absl::GetFlag(FLAGS_trainers));
  auto shard_counts = testing::ParseCountList(absl::GetFlag(FLAGS_shards));
  const ModelLayout layout = LayoutOfPreset(*config);
  const std::vector<float> initial(layout.total_elements(), 0.01f);
  const std::vector<float> gradient(layout.total_elements(), 1e-4f);
  std::printf(
      "spotps-bench-scaling: model %s (%lld parameters), compute replaced by %d ms, %d steps, "
      "loopback (no link cap)\n",
      absl::GetFlag(FLAGS_model).c_str(), static_cast<long long>(layout.total_elements()),
      absl::GetFlag(FLAGS_compute_ms), absl::GetFlag(FLAGS_steps));
  std::printf(
      "\n| shards | trainers | updates/s | updates/s per shard | MB/s per shard | "
      "efficiency |\n|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  const int target =
      std::find(trainer_counts->begin(), trainer_counts->end(), 8) != trainer_counts->end()
          ? 8
          : *std::max_element(trainer_counts->begin(), trainer_counts->end());
  double best = -1;
  int best_shards = 0;
  std::vector<std::string> saturation;
  for (int shards : *shard_counts) {
    testing::TempDir dir;
    // Pushes applied on arrival: what a shard can take, not how long the
    // default's averaging holds trainers of equal pace together.
    auto cluster = testing::LocalShardCluster::Start(
        shards, {"--optimizer=adamw", "--staleness_method=none"}, dir.path());
    if (!cluster.ok()) return std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str()), 1;
    {
      auto setup = Cluster::Connect((*cluster)->addresses());
      if (!setup.ok()) return 1;
      auto init = (*setup)->Init(layout, initial);
      if (!init.ok()) return std::fprintf(stderr, "%s\n", init.status().ToString().c_str()), 1;
    }
    double single = 0;
    std::string saturates = "no saturation seen";
    for (int n : *trainer_counts) {
      auto point = Measure((*cluster)->addresses(), n, gradient);
      if (!point.ok()) return std::fprintf(stderr, "%s\n", point.status().ToString().c_str()), 1;
      if (single == 0) single = point->updates_per_s / n;  // The first (smallest) N.
      const double efficiency = point->updates_per_s / (n * single);
      std::printf("| %d | %d | %.2f | %.2f | %.1f | %.3f |\n", shards, n, point->updates_per_s,
                  point->updates_per_s / shards, point->bytes_per_s / shards / 1e6, efficiency);
      std::fflush(stdout);
      if (efficiency < 0.9 && saturates == "no saturation seen") {
        saturates =
            absl::StrCat("below 0.9 from N=", n, " (",
                         static_cast<int>(point->bytes_per_s / shards / 1e6), " MB/s per shard)");
      }
      if (n == target && efficiency > best + 1e-9) {
        best = efficiency;
        best_shards = shards;
      }
    }
    saturation.push_back(absl::StrCat("  shards=", shards, ": ", saturates));
  }
  std::printf("\n");
  for (const std::string& line : saturation) std::printf("%s\n", line.c_str());
  std::printf("scaling: efficiency_at_8=%.3f shards=%d model=%s\n", best, best_shards,
              absl::GetFlag(FLAGS_model).c_str());
  return 0;
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  spotps::SetLogProgramName("spotps-bench-scaling");
  spotps::ParseFlagsOrExit(argc, argv);
  if (spotps::UsageProblems problems = spotps::FlagProblems(); !problems.empty()) {
    return spotps::UsageError(problems.ToStatus());
  }
  if (spotps::CheckFlagsOnly()) return 0;
  spotps::TuneAllocatorForBulkTransfers();
  return spotps::Run();
}
