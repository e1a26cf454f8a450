// spotps-bench-convergence: how well each consistency mode learns per token.
// For every model x trainer count, one job per mode on one local shard with
// the same fixed token budget (--units work units of batch x seq_len tokens,
// one epoch), the same seed, lr and data; trainer processes of one thread.
// Each job reports the validation loss of the final weights, its wall time
// and the trainers' mean staleness. Modes:
//   async        the shard's default method (fresh: concurrent pushes averaged)
//   async_lr     async with --staleness_method=lr (lr / (1 + staleness))
//   async_dc     async with --staleness_method=dc (delay-compensated AdamW)
//   async:SPEC   async with --staleness_method=SPEC (e.g. none, dc+avg)
//   ssp:S        bounded staleness
//   sync         one averaged step per round of one gradient per trainer
//   local:H      local steps: H inner AdamW steps (lr --lr) per push, the
//                shard's default outer optimizer (Nesterov SGD, lr 0.7)
//   local_delayed:H  local steps applied on arrival, the outer momentum
//                delayed (--staleness_method=delayed): for mixed speeds
//   MODE/int8    any of these with int8 pushes (--push_dtype=int8)
//   MODE/int8-nofeedback  int8 pushes that drop their rounding error every
//                push (--int8_error_feedback=false): a bound on what
//                losing the residual at a preemption can cost
// Each job also reports the bytes the shard moved (in and out) per token.
// With --warm_units=N every job starts from the weights of one async job of
// N units (exported with spotps-ctl, given to trainers as --init_from), the
// regime local steps were designed for.
// With --slow_trainers=N the first N trainers run at --slow_nice, so that
// they get a smaller share of the host's cores (trainers of mixed speeds),
// and each job reports the share of the units those trainers trained.
// Last line: convergence: async_vs_sync=R wall_vs_sync=W, from the largest
// configuration run (the `small` model with 4 trainers when requested):
// R = async val loss / sync val loss, W = async wall time / sync wall time.
// With local modes it is followed by `local: H=... bytes_ratio=B
// loss_ratio=L` for the local mode of the lowest loss in that
// configuration: B = async's bytes per token / its, L = its val loss /
// async's; with --trainer_mbit also time_ratio=T, its wall time / async's
// with every job run again over capped links (network namespaces).
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/consistency.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/transport_args.h"
#include "common/usage_problems.h"
#include "tests/support/child_process.h"
#include "tests/support/count_list.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/hosted_job.h"
#include "tests/support/log_fields.h"
#include "trainer/data/training_data.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/runtime/compute_runtime.h"

ABSL_FLAG(std::string, models, "tiny", "Model presets, comma-separated (tiny,small).");
ABSL_FLAG(std::string, trainers, "4", "Trainer counts, comma-separated (2,4).");
ABSL_FLAG(std::string, modes, "async,async_lr,async_dc,ssp:2,sync",
          "Modes, comma-separated: async, async_lr, async_dc, async:SPEC (any "
          "--staleness_method), ssp:S, sync, local:H; MODE/int8: with int8 pushes; "
          "MODE/int8-nofeedback: without their error feedback.");
ABSL_FLAG(int64_t, units, 160, "Token budget in work units (one trainer step each).");
ABSL_FLAG(int64_t, batch, 16, "Sequences per step.");
ABSL_FLAG(int64_t, seq_len, 128, "Tokens per sequence.");
ABSL_FLAG(double, lr, 1e-3,
          "AdamW learning rate on the shard (local modes: the trainers' inner AdamW's, unless "
          "--inner_lr is set).");
ABSL_FLAG(double, inner_lr, 0, "Local modes: the trainers' inner AdamW learning rate; 0: --lr.");
ABSL_FLAG(double, dc_lambda, 1.0, "async_dc's --dc_lambda.");
ABSL_FLAG(double, outer_lr, 0.7,
          "Local modes: the shard's outer learning rate (Nesterov SGD, momentum 0.9).");
ABSL_FLAG(double, average_wait_ms, 1000,
          "The shard's --average_wait_ms: how long an averaged round waits for its last push.");
ABSL_FLAG(int64_t, trainer_mbit, 0,
          "Also run every job over capped links, for its wall time: the shard and each trainer "
          "in a network namespace of its own, trainers' links capped at this many Mbit/s (tbf), "
          "the shard's at --shard_mbit. Needs root. 0: loopback only.");
ABSL_FLAG(int64_t, shard_mbit, 1000, "The shard's link cap in the capped runs (--trainer_mbit).");
ABSL_FLAG(int, slow_trainers, 0,
          "This many of each job's trainers run at --slow_nice (spotps-trainer --nice), the "
          "rest at 0: trainers of mixed speeds on a shared host.");
ABSL_FLAG(int, slow_nice, 10, "The slow trainers' nice value (1-19).");
ABSL_FLAG(int64_t, warm_units, 0,
          "Start every job from the weights of one async job of this many units (its own data "
          "order), exported with spotps-ctl export and given to each trainer as --init_from: "
          "fine-tuning's regime, and DiLoCo's, which starts local steps from a pretrained model. "
          "0: from --seed's weights.");
ABSL_FLAG(int64_t, eval_batches, 16, "Validation batches for the final loss.");
ABSL_FLAG(std::string, data, "",
          "Token file (e.g. .cache/corpus/kjv.tokens); empty: a generated corpus.");
ABSL_FLAG(double, job_timeout_s, 1800, "Give up on a job after this long.");

namespace spotps {
namespace {

struct JobResult {
  double val_loss = 0;
  double wall_s = 0;
  double staleness = 0;
  double bytes_per_token = 0;  // Pulled and pushed, as the shard counts them.
  double capped_wall_s = -1;   // The same job over capped links; -1: not run.
  double slow_share = -1;      // The slow trainers' share of the units; -1: none ran.
};

// "MODE/DTYPE": the shards' mode, and the trainers' push dtype ("" if none).
std::pair<std::string, std::string> SplitMode(const std::string& mode) {
  const std::vector<std::string> parts = absl::StrSplit(mode, absl::MaxSplits('/', 1));
  return {parts[0], parts.size() > 1 ? parts[1] : ""};
}

// Where a job starts and what it leaves: its token budget, its data order,
// the weights its trainers start from ("": --seed's) and, if set, the file
// its final weights are exported to (spotps-ctl export).
struct JobStart {
  int64_t units = 0;
  uint64_t data_seed = 1;
  std::string init_from;
  std::string export_to;
};

// The bench's name for local:H with --staleness_method=delayed.
constexpr char kLocalDelayed[] = "local_delayed:";

// The job starts once all `trainers` are in (--min_workers), so that every
// mode's first update holds all of their first gradients.
std::vector<std::string> ShardFlags(const std::string& mode, const JobStart& job, int trainers) {
  std::vector<std::string> f = {
      "--epochs=1",
      absl::StrCat("--units_per_epoch=", job.units),
      absl::StrCat("--data_seed=", job.data_seed),
      "--worker_lease_s=10",
      "--unit_lease_s=600",
      absl::StrCat("--min_workers=", trainers),
      absl::StrCat("--average_wait_ms=", absl::GetFlag(FLAGS_average_wait_ms))};
  // Local modes keep the outer optimizer local mode defaults to, at
  // --outer_lr; --lr is their trainers' inner one.
  if (absl::StartsWith(mode, "local")) {
    f.push_back(absl::StrCat("--lr=", absl::GetFlag(FLAGS_outer_lr)));
  } else {
    f.insert(f.end(), {"--optimizer=adamw", absl::StrCat("--lr=", absl::GetFlag(FLAGS_lr))});
  }
  if (mode == "async_lr") {
    f.insert(f.end(), {"--consistency=async", "--staleness_method=lr"});
  } else if (mode == "async_dc") {
    f.insert(f.end(), {"--consistency=async", "--staleness_method=dc",
                       absl::StrCat("--dc_lambda=", absl::GetFlag(FLAGS_dc_lambda))});
  } else if (absl::StartsWith(mode, kLocalDelayed)) {
    f.insert(f.end(), {"--consistency=local:" + mode.substr(std::strlen(kLocalDelayed)),
                       "--staleness_method=delayed"});
  } else if (absl::StartsWith(mode, "async:")) {
    f.insert(f.end(), {"--consistency=async", "--staleness_method=" + mode.substr(6),
                       absl::StrCat("--dc_lambda=", absl::GetFlag(FLAGS_dc_lambda))});
  } else {
    f.push_back("--consistency=" + mode);
  }
  return f;
}

absl::StatusOr<double> FinalValLoss(const std::string& addresses, const std::string& model_name,
                                    const TrainingData& data) {
  auto cluster = Cluster::Connect(addresses);
  if (!cluster.ok()) return cluster.status();
  WeightSnapshot w;
  if (absl::Status s = (*cluster)->FetchLayout(); !s.ok()) return s;
  if (absl::Status s = (*cluster)->Pull(v1::DTYPE_FP32, &w); !s.ok()) return s;
  auto config = GptConfigFromPreset(model_name);
  if (!config.ok()) return config.status();
  auto model = BuiltinGptModel::Create(*config, std::nullopt, model_name);
  if (!model.ok()) return model.status();
  auto binding = ParameterBinding::Create(**model);
  if (!binding.ok()) return binding.status();
  binding->LoadWeights(w.values);
  absl::StatusOr<Evaluation> eval =
      Evaluate(**model, data, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_seq_len),
               absl::GetFlag(FLAGS_eval_batches), ComputeDType::kBF16);
  if (!eval.ok()) return eval.status();
  return eval->loss;
}

double InnerLr() {
  const double inner = absl::GetFlag(FLAGS_inner_lr);
  return inner > 0 ? inner : absl::GetFlag(FLAGS_lr);
}

// Trainer i's flags but --ps.
std::vector<std::string> TrainerFlags(const std::string& model, const std::string& mode,
                                      const std::string& tokens, const JobStart& job, int i) {
  const std::string dtype = SplitMode(mode).second;
  const int nice = i < absl::GetFlag(FLAGS_slow_trainers) ? absl::GetFlag(FLAGS_slow_nice) : 0;
  return {"--model=" + model,
          "--init_from=" + job.init_from,
          "--data=" + tokens,
          absl::StrCat("--batch=", absl::GetFlag(FLAGS_batch)),
          absl::StrCat("--seq_len=", absl::GetFlag(FLAGS_seq_len)),
          "--threads=1",
          absl::StrCat("--worker_index=", i),
          absl::StrCat("--nice=", nice),
          "--log_every=0",
          "--eval_batches=0",
          absl::StrCat("--inner_lr=", InnerLr()),
          "--push_dtype=" + dtype.substr(0, dtype.find('-')),
          std::string("--int8_error_feedback=") + (dtype == "int8-nofeedback" ? "false" : "true")};
}

// Waits for every trainer to exit 0 by the job's timeout; an error names
// the one that did not, with its log's tail.
absl::Status WaitForTrainers(std::vector<std::unique_ptr<testing::ChildProcess>>& procs,
                             const std::string& mode, const std::string& dir, absl::Time start) {
  const absl::Time give_up = start + absl::Seconds(absl::GetFlag(FLAGS_job_timeout_s));
  for (size_t i = 0; i < procs.size(); ++i) {
    auto code = procs[i]->Wait(std::max(give_up - absl::Now(), absl::Seconds(1)));
    if (!code.ok() || *code != 0) {
      const std::string log = ReadFile(absl::StrCat(dir, "/trainer", i, ".log")).value_or("");
      const std::string why =
          code.ok() ? absl::StrCat("exited ", *code)
                    : absl::StrCat("ran past --job_timeout_s=", absl::GetFlag(FLAGS_job_timeout_s));
      return absl::InternalError(absl::StrCat("trainer ", i, " of ", mode, " ", why, ": ",
                                              log.substr(log.size() > 600 ? log.size() - 600 : 0)));
    }
  }
  return absl::OkStatus();
}

// The job's wall time with the shard and each trainer on a host of its own
// (testing::NetworkHosts), the trainers' links capped at --trainer_mbit.
absl::StatusOr<double> CappedWallSeconds(const std::string& model, int trainers,
                                         const std::string& mode, const std::string& tokens,
                                         const JobStart& job, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  std::vector<testing::HostSpec> specs = {{"shard0", absl::GetFlag(FLAGS_shard_mbit)}};
  for (int i = 0; i < trainers; ++i) {
    specs.push_back({absl::StrCat("trainer", i), absl::GetFlag(FLAGS_trainer_mbit)});
  }
  auto hosts = testing::NetworkHosts::Create(specs);
  if (!hosts.ok()) return hosts.status();
  testing::HostedShards spec;
  spec.count = 1;
  spec.flags = ShardFlags(SplitMode(mode).first, job, trainers);
  auto shards = testing::StartHostedShards(**hosts, dir, spec);
  if (!shards.ok()) return shards.status();
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<testing::ChildProcess>> procs;
  for (int i = 0; i < trainers; ++i) {
    auto t = testing::StartHostedTrainer(**hosts, dir, spec, i, tokens,
                                         TrainerFlags(model, mode, tokens, job, i));
    if (!t.ok()) return t.status();
    procs.push_back(*std::move(t));
  }
  if (absl::Status s = WaitForTrainers(procs, mode, dir, start); !s.ok()) return s;
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Writes the cluster's weights to `path` with spotps-ctl export, as a user
// would between a pretraining and a fine-tuning job.
absl::Status ExportWeights(const std::string& addresses, const std::string& path,
                           const std::string& dir) {
  return testing::RunToSuccess(
      {testing::BinaryPath("spotps-ctl"), "--ps=" + addresses, "export", "--out=" + path},
      dir + "/export.log", absl::Minutes(5));
}

absl::StatusOr<JobResult> RunJob(const std::string& model, int trainers, const std::string& mode,
                                 const std::string& tokens, const TrainingData& data,
                                 const JobStart& job, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  auto shards =
      testing::LocalShardCluster::Start(1, ShardFlags(SplitMode(mode).first, job, trainers), dir);
  if (!shards.ok()) return shards.status();
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<testing::ChildProcess>> procs;
  for (int i = 0; i < trainers; ++i) {
    std::vector<std::string> argv = {testing::BinaryPath("spotps-trainer"),
                                     "--ps=" + (*shards)->addresses()};
    for (std::string& f : TrainerFlags(model, mode, tokens, job, i)) argv.push_back(std::move(f));
    auto t = testing::ChildProcess::Start(argv, absl::StrCat(dir, "/trainer", i, ".log"));
    if (!t.ok()) return t.status();
    procs.push_back(*std::move(t));
  }
  if (absl::Status s = WaitForTrainers(procs, mode, dir, start); !s.ok()) return s;
  JobResult result;
  result.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  double slow_units = 0;
  for (int i = 0; i < trainers; ++i) {
    const std::string log = ReadFile(absl::StrCat(dir, "/trainer", i, ".log")).value_or("");
    result.staleness += testing::LogField(log, "staleness") / trainers;
    if (i < absl::GetFlag(FLAGS_slow_trainers)) slow_units += testing::LogField(log, "units");
  }
  if (absl::GetFlag(FLAGS_slow_trainers) > 0) {
    result.slow_share = slow_units / static_cast<double>(job.units);
  }
  auto cluster = Cluster::Connect((*shards)->addresses());
  if (!cluster.ok()) return cluster.status();
  auto stats = (*cluster)->Stats();
  if (!stats.ok()) return stats.status();
  const double tokens_trained =
      static_cast<double>(job.units * absl::GetFlag(FLAGS_batch) * absl::GetFlag(FLAGS_seq_len));
  result.bytes_per_token =
      static_cast<double>((*stats)[0].bytes_in() + (*stats)[0].bytes_out()) / tokens_trained;
  auto loss = FinalValLoss((*shards)->addresses(), model, data);
  if (!loss.ok()) return loss.status();
  result.val_loss = *loss;
  if (!job.export_to.empty()) {
    if (absl::Status s = ExportWeights((*shards)->addresses(), job.export_to, dir); !s.ok()) {
      return s;
    }
  }
  return result;
}

// One row of the table; "vs sync" is "-" without a sync job.
void PrintRow(const std::string& model, int trainers, const std::string& label, const JobResult& r,
              const JobResult* sync) {
  const std::string vs =
      sync == nullptr ? "-" : absl::StrFormat("%.3f", r.val_loss / sync->val_loss);
  const std::string capped = r.capped_wall_s > 0 ? absl::StrFormat("%.1f", r.capped_wall_s) : "-";
  const std::string slow = r.slow_share >= 0 ? absl::StrFormat("%.1f%%", 100 * r.slow_share) : "-";
  std::printf("| %s | %d | %s | %.4f | %s | %.1f | %.2f | %.0f | %s | %s |\n", model.c_str(),
              trainers, label.c_str(), r.val_loss, vs.c_str(), r.wall_s, r.staleness,
              r.bytes_per_token, capped.c_str(), slow.c_str());
}

// Every job's start: --seed's weights, or with --warm_units those of an
// async job of that many units on another data order, which it reports.
absl::StatusOr<JobStart> WarmStart(const std::string& model, int trainers,
                                   const std::string& tokens, const TrainingData& data,
                                   const std::string& dir) {
  JobStart start;
  start.units = absl::GetFlag(FLAGS_units);
  if (absl::GetFlag(FLAGS_warm_units) == 0) return start;
  JobStart warm;
  warm.units = absl::GetFlag(FLAGS_warm_units);
  warm.data_seed = 2;
  warm.export_to = dir + "/warm.safetensors";
  auto r = RunJob(model, trainers, "async", tokens, data, warm, dir);
  if (!r.ok()) return r.status();
  PrintRow(model, trainers, absl::StrCat("warm start: async, ", warm.units, " units"), *r, nullptr);
  std::fflush(stdout);
  start.init_from = warm.export_to;
  return start;
}

// A local mode against `async`, the last line's three figures.
struct LocalRatios {
  double bytes = 0;  // async's bytes per token over the mode's.
  double loss = 0;   // The mode's validation loss over async's.
  double time = -1;  // The mode's capped wall time over async's; -1: not run.

  LocalRatios(const JobResult& local, const JobResult& async)
      : bytes(async.bytes_per_token / local.bytes_per_token),
        loss(local.val_loss / async.val_loss) {
    if (local.capped_wall_s > 0 && async.capped_wall_s > 0) {
      time = local.capped_wall_s / async.capped_wall_s;
    }
  }
  // Of the targets B >= 30, L <= 1.05 and T <= 0.5, how many it meets.
  int GoalsMet() const { return (bytes >= 30) + (loss <= 1.05) + (time >= 0 && time <= 0.5); }
};

// "local: H=... bytes_ratio=B loss_ratio=L [time_ratio=T]" for the local
// mode among `results` that meets the most targets, of those the lowest
// loss; "" without local modes.
std::string LocalLine(const std::map<std::string, JobResult>& results, const JobResult& async) {
  const std::string* best = nullptr;
  std::optional<LocalRatios> best_ratios;
  for (const auto& [mode, result] : results) {
    if (!absl::StartsWith(mode, "local")) continue;
    const LocalRatios r(result, async);
    const bool better = !best_ratios || r.GoalsMet() > best_ratios->GoalsMet() ||
                        (r.GoalsMet() == best_ratios->GoalsMet() && r.loss < best_ratios->loss);
    if (better) {
      best = &mode;
      best_ratios = r;
    }
  }
  if (best == nullptr) return "";
  std::string line =
      absl::StrFormat("local: H=%s bytes_ratio=%.1f loss_ratio=%.3f",
                      best->substr(best->find(':') + 1), best_ratios->bytes, best_ratios->loss);
  if (best_ratios->time >= 0) absl::StrAppendFormat(&line, " time_ratio=%.3f", best_ratios->time);
  return line;
}

std::vector<std::string> List(const std::string& flag) {
  return absl::StrSplit(flag, ',', absl::SkipWhitespace());
}

// A --modes entry's problem, or "" if it names a mode this bench runs.
std::string ModeProblem(const std::string& entry) {
  const auto [mode, dtype] = SplitMode(entry);
  if (!dtype.empty() && dtype != "int8" && dtype != "int8-nofeedback") {
    return absl::StrCat("--modes entry '", entry, "': after '/', int8 or int8-nofeedback");
  }
  if (mode == "async_lr" || mode == "async_dc" ||
      (absl::StartsWith(mode, "async:") && mode.size() > 6)) {
    return "";
  }
  if (absl::StartsWith(mode, kLocalDelayed)) {
    absl::StatusOr<Consistency> c =
        ParseConsistency("local:" + mode.substr(std::strlen(kLocalDelayed)));
    return c.ok() ? "" : absl::StrCat("--modes entry '", entry, "': ", c.status().message());
  }
  absl::StatusOr<Consistency> c = ParseConsistency(mode);
  return c.ok() ? ""
                : absl::StrCat("--modes entry '", entry,
                               "': want async, async_lr, async_dc, async:SPEC, local_delayed:H "
                               "or a --consistency value (",
                               c.status().message(), ")");
}

// Every problem with the flags, before anything starts.
UsageProblems FlagProblems() {
  UsageProblems problems;
  for (const std::string& model : List(absl::GetFlag(FLAGS_models))) {
    problems.Check(GptConfigFromPreset(model).status(), "--models");
  }
  problems.Check(testing::ParseCountList(absl::GetFlag(FLAGS_trainers)).status(), "--trainers");
  for (const std::string& mode : List(absl::GetFlag(FLAGS_modes))) {
    if (std::string problem = ModeProblem(mode); !problem.empty()) problems.Add(problem);
  }
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"--units", absl::GetFlag(FLAGS_units)},
        {"--batch", absl::GetFlag(FLAGS_batch)},
        {"--seq_len", absl::GetFlag(FLAGS_seq_len)},
        {"--eval_batches", absl::GetFlag(FLAGS_eval_batches)},
        {"--shard_mbit", absl::GetFlag(FLAGS_shard_mbit)}}) {
    problems.Require(value >= 1, absl::StrCat(name, " must be at least 1"));
  }
  problems.Require(absl::GetFlag(FLAGS_lr) > 0 && absl::GetFlag(FLAGS_outer_lr) > 0,
                   "--lr and --outer_lr must be positive");
  problems.Require(absl::GetFlag(FLAGS_inner_lr) >= 0, "--inner_lr must not be negative");
  problems.Require(absl::GetFlag(FLAGS_warm_units) >= 0, "--warm_units must not be negative");
  problems.Require(absl::GetFlag(FLAGS_average_wait_ms) >= 0,
                   "--average_wait_ms must not be negative");
  problems.Require(absl::GetFlag(FLAGS_dc_lambda) >= 0, "--dc_lambda must not be negative");
  problems.Require(absl::GetFlag(FLAGS_slow_trainers) >= 0, "--slow_trainers must not be negative");
  problems.Require(absl::GetFlag(FLAGS_slow_nice) >= 1 && absl::GetFlag(FLAGS_slow_nice) <= 19,
                   "--slow_nice must be in [1, 19]");
  problems.Require(absl::GetFlag(FLAGS_trainer_mbit) >= 0, "--trainer_mbit must not be negative");
  problems.Require(absl::GetFlag(FLAGS_job_timeout_s) > 0, "--job_timeout_s must be positive");
  return problems;
}

int Run() {
  ComputeRuntimeOptions runtime_options;
  runtime_options.threads = 1;
  auto runtime = ConfigureComputeRuntime(runtime_options);
  if (!runtime.ok()) return std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str()), 1;
  testing::TempDir dir;
  std::string tokens = absl::GetFlag(FLAGS_data);
  if (tokens.empty()) {
    auto made = testing::MakeTokenFile(dir.path(), 200'000);
    if (!made.ok()) return std::fprintf(stderr, "%s\n", made.status().ToString().c_str()), 1;
    tokens = *made;
  }
  auto data = OpenTrainingData(tokens, TokenFileFormat::kSpotps);
  if (!data.ok()) return std::fprintf(stderr, "%s\n", data.status().ToString().c_str()), 1;
  const int64_t units = absl::GetFlag(FLAGS_units);
  std::printf(
      "spotps-bench-convergence: %lld units of %lld x %lld tokens per job, lr %g (local modes: "
      "inner %g, outer %g), %s\n",
      static_cast<long long>(units), static_cast<long long>(absl::GetFlag(FLAGS_batch)),
      static_cast<long long>(absl::GetFlag(FLAGS_seq_len)), absl::GetFlag(FLAGS_lr), InnerLr(),
      absl::GetFlag(FLAGS_outer_lr), tokens.c_str());
  std::printf(
      "\n| model | trainers | mode | val loss | vs sync | wall s | staleness | bytes/token | "
      "capped wall s | slow trainers' units |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  double ratio = -1, wall_ratio = -1;
  std::string local_line;
  int job = 0;
  // FlagProblems checked them.
  const std::vector<int64_t> trainer_counts =
      *testing::ParseCountList(absl::GetFlag(FLAGS_trainers));
  for (const std::string& model : List(absl::GetFlag(FLAGS_models))) {
    for (int64_t count : trainer_counts) {
      const int trainers = static_cast<int>(count);
      std::map<std::string, JobResult> results;
      auto start =
          WarmStart(model, trainers, tokens, **data, absl::StrCat(dir.path(), "/warm", job));
      if (!start.ok()) return std::fprintf(stderr, "%s\n", start.status().ToString().c_str()), 1;
      for (const std::string& mode : List(absl::GetFlag(FLAGS_modes))) {
        const std::string job_dir = absl::StrCat(dir.path(), "/job", job++);
        auto r = RunJob(model, trainers, mode, tokens, **data, *start, job_dir);
        if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
        results[mode] = *r;
        if (absl::GetFlag(FLAGS_trainer_mbit) > 0) {
          auto capped =
              CappedWallSeconds(model, trainers, mode, tokens, *start, job_dir + "-capped");
          if (!capped.ok()) {
            return std::fprintf(stderr, "%s\n", capped.status().ToString().c_str()), 1;
          }
          results[mode].capped_wall_s = *capped;
        }
      }
      const auto sync = results.find("sync");
      for (const std::string& mode : List(absl::GetFlag(FLAGS_modes))) {
        PrintRow(model, trainers, mode, results[mode],
                 sync == results.end() ? nullptr : &sync->second);
      }
      std::fflush(stdout);
      const auto async = results.find("async");
      if (sync != results.end() && async != results.end()) {
        ratio = async->second.val_loss / sync->second.val_loss;
        wall_ratio = async->second.wall_s / sync->second.wall_s;
      }
      if (async != results.end()) {
        if (std::string line = LocalLine(results, async->second); !line.empty()) {
          local_line = line;
        }
      }
    }
  }
  std::printf("\nconvergence: async_vs_sync=%.3f wall_vs_sync=%.3f\n", ratio, wall_ratio);
  if (!local_line.empty()) std::printf("%s\n", local_line.c_str());
  return 0;
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  spotps::SetLogProgramName("spotps-bench-convergence");
  spotps::ParseFlagsOrExit(argc, argv);
  if (spotps::UsageProblems problems = spotps::FlagProblems(); !problems.empty()) {
    return spotps::UsageError(problems.ToStatus());
  }
  if (spotps::CheckFlagsOnly()) return 0;
  spotps::TuneAllocatorForBulkTransfers();
  return spotps::Run();
}
