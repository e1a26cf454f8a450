// spotps-bench-trainer: what training through the parameter server costs on
// the `small` model, against baselines measured in the same run with the
// same threads:
//   (a) BF16 vs FP32 training tokens/s (plain in-process loop);
//   (b) 1 trainer against 1 local shard process vs a plain LibTorch loop
//       with the same optimizer (AdamW) and no PS, both BF16;
//   (c) achieved forward+backward GFLOP/s vs a BF16 matmul's GFLOP/s;
//   (d) 1 trainer against 1 local shard vs PyTorch eager (Debian's
//       python3-torch running tests/bench/torch_baseline.py: the same GPT
//       shape, BF16 autocast, AdamW, clipping, batch and threads);
//   (b), (c) and (d) alternate --rounds times (plain BF16 loop, matmul, PS
//       run, PyTorch) and each rate keeps its best;
//   (e) a spotps-trainer process joining a running job (the shard holds
//       the model): process start to its first applied push, the median of
//       --join_runs, with the trainer's default join ramp.
//   (f) the same shape exported as TorchScript by tools/models/export_model.py
//       (--arch=gpt2) in the plain BF16 loop, alternating with (b)-(d);
//   (g) (b) with the shard in its default mode, "fresh" (pushes averaged
//       into one update and answered once it is applied: push, pull, then
//       compute), against the plain loop.
// Last line: bf16_speedup=S ps_efficiency=E mfu_ratio=M torch_ratio=T
// first_push_s=F script_ratio=R fresh_efficiency=G.
#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/transport_args.h"
#include "common/usage_problems.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/training_data.h"
#include "trainer/elastic/training_worker.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/torchscript_model.h"
#include "trainer/runtime/compute_runtime.h"

#ifndef SPOTPS_TORCH_BASELINE_SCRIPT
#define SPOTPS_TORCH_BASELINE_SCRIPT "tests/bench/torch_baseline.py"
#endif

ABSL_FLAG(std::string, model, "small", "Model preset.");
ABSL_FLAG(int64_t, batch, 16, "Sequences per step.");
ABSL_FLAG(int64_t, seq_len, 256, "Tokens per sequence.");
ABSL_FLAG(int64_t, steps, 12, "Timed steps per configuration (after 2 warm-up steps).");
ABSL_FLAG(int, threads, 0, "Intra-op threads; 0: one per physical core.");
ABSL_FLAG(int, rounds, 3,
          "The plain BF16 loop, the matmul, the spotps trainer and PyTorch runs alternate this "
          "many times and each keeps its best, so a burst of load from other processes lowers "
          "one round of each side rather than one side.");
ABSL_FLAG(int, shard_nice, 10, "spotps-ps --nice for the co-located shard of the PS run.");
ABSL_FLAG(int, transfer_nice, 10, "TrainingOptions::transfer_nice of the PS run's trainer.");
ABSL_FLAG(std::string, staleness_method, "none",
          "The shard's --staleness_method for the PS and join runs. none: pushes applied on "
          "arrival, so the trainer hides pull and push behind compute; fresh (spotps-ps's "
          "default) adds them to each step.");
ABSL_FLAG(std::string, shard_flags, "",
          "Extra flags for the PS runs' shard, comma-separated (e.g. --apply_threads=1).");
ABSL_FLAG(int, join_runs, 3, "spotps-trainer processes timed from start to first push.");
ABSL_FLAG(std::string, join_flags, "",
          "Extra flags for those trainers, comma-separated (e.g. --first_step_batch=0).");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with torch, for the PyTorch baseline.");
ABSL_FLAG(std::string, torch_baseline, SPOTPS_TORCH_BASELINE_SCRIPT,
          "The PyTorch eager baseline script (tests/bench/torch_baseline.py).");

namespace spotps {
namespace {

constexpr double kLr = 3e-4;

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

// Training FLOPs per token: 6 per weight used in a matmul (forward 2,
// backward 4) plus attention's score and value products.
double FlopsPerToken(const GptConfig& c, int64_t seq_len) {
  const double matmul_weights = static_cast<double>(GptParameterCount(c)) -
                                static_cast<double>(c.context_len * c.d_model);  // wpe: lookups.
  return 6.0 * matmul_weights + 12.0 * c.n_layer * seq_len * c.d_model;
}

absl::StatusOr<std::string> MakeTokenFile(const std::string& dir) {
  std::string text;
  for (int i = 0; text.size() < 2'000'000; ++i) {
    absl::StrAppend(&text, "In the beginning was the word ", i % 977, ", and the word was ",
                    (i * 31) % 1009, ".\n");
  }
  const std::string text_path = dir + "/bench.txt", tokens_path = dir + "/bench.tokens";
  if (absl::Status s = WriteFileAtomically(text_path, text); !s.ok()) return s;
  auto tokenize = testing::ChildProcess::Start(
      {testing::BinaryPath("spotps-tokenize"), "--input=" + text_path, "--output=" + tokens_path},
      dir + "/tokenize.log");
  if (!tokenize.ok()) return tokenize.status();
  auto code = (*tokenize)->Wait(absl::Seconds(120));
  if (!code.ok() || *code != 0) return absl::InternalError("spotps-tokenize failed");
  return tokens_path;
}

// Plain LibTorch: the model, AdamW and nothing else, in one process.
absl::StatusOr<double> PlainTokensPerSecond(TrainableModel& model, const TrainingData& data,
                                            ComputeDType dtype) {
  std::vector<torch::Tensor> params;
  for (auto& [name, p] : model.Parameters()) params.push_back(p);
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(kLr));
  model.SetTraining(true);
  const int64_t batch = absl::GetFlag(FLAGS_batch), seq = absl::GetFlag(FLAGS_seq_len);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  absl::Time start;
  for (int64_t step = -2; step < steps; ++step) {
    if (step == 0) start = absl::Now();
    auto b = data.TrainBatch(1, static_cast<uint64_t>(step + 2), batch, seq);
    if (!b.ok()) return b.status();
    opt.zero_grad();
    auto loss = ComputeLoss(model, *b, dtype);
    if (!loss.ok()) return loss.status();
    loss->backward();
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    opt.step();
  }
  return steps * batch * seq / Seconds(start);
}

// The built-in preset, freshly drawn.
absl::StatusOr<double> BuiltinTokensPerSecond(const GptConfig& config, const TrainingData& data,
                                              ComputeDType dtype) {
  auto model = BuiltinGptModel::Create(config, 1, absl::GetFlag(FLAGS_model));
  if (!model.ok()) return model.status();
  return PlainTokensPerSecond(**model, data, dtype);
}

// The same shape exported by tools/models/export_model.py --arch=gpt2 and
// loaded as a user's TorchScript file.
absl::StatusOr<double> ScriptTokensPerSecond(const std::string& path, const TrainingData& data) {
  auto model = TorchScriptModel::Load(path);
  if (!model.ok()) return model.status();
  return PlainTokensPerSecond(**model, data, ComputeDType::kBF16);
}

// The real trainer loop against one spotps-ps process on the same host,
// niced as docs/operations.md advises for a shard that shares a host with trainers.
absl::StatusOr<double> PsTokensPerSecond(const GptConfig& config, const TrainingData& data,
                                         const std::string& dir,
                                         const std::string& staleness_method) {
  std::vector<std::string> shard_flags = {"--optimizer=adamw", absl::StrCat("--lr=", kLr),
                                          absl::StrCat("--nice=", absl::GetFlag(FLAGS_shard_nice)),
                                          "--staleness_method=" + staleness_method};
  for (absl::string_view f :
       absl::StrSplit(absl::GetFlag(FLAGS_shard_flags), ',', absl::SkipEmpty())) {
    shard_flags.emplace_back(f);
  }
  auto shards = testing::LocalShardCluster::Start(1, shard_flags, dir);
  if (!shards.ok()) return shards.status();
  auto cluster = Cluster::Connect((*shards)->addresses());
  if (!cluster.ok()) return cluster.status();
  auto model = CreateGptModel(config, 1);
  if (!model.ok()) return model.status();
  TrainingOptions options;
  options.batch_size = absl::GetFlag(FLAGS_batch);
  options.seq_len = absl::GetFlag(FLAGS_seq_len);
  options.log_every = 0;
  options.eval_batches = 0;
  options.transfer_nice = absl::GetFlag(FLAGS_transfer_nice);
  // Timed as the plain loop is: 2 warm-up steps, then --steps, in one run,
  // so that the timed steps find the worker's buffers and the allocator warm.
  constexpr int64_t kWarmSteps = 2;
  options.max_steps = kWarmSteps + absl::GetFlag(FLAGS_steps);
  absl::Time timed_start, timed_end;  // At the ends of step kWarmSteps and of the last.
  int64_t tokens_before = 0, tokens = 0;
  double compute_s = 0, pull_s = 0, push_s = 0;
  options.on_step = [&](const StepRecord& r) {
    if (r.steps == kWarmSteps) {
      timed_start = absl::Now();
      tokens_before = r.tokens;
    } else if (r.steps > kWarmSteps) {
      timed_end = absl::Now();
      tokens = r.tokens - tokens_before;
      compute_s += r.compute_s;
      pull_s += r.pull_s;
      push_s += r.push_s;
    }
  };
  std::atomic<bool> stop{false};
  auto worker = TrainingWorker::Create(
      cluster->get(), std::make_unique<BuiltinGptModel>(*model, absl::GetFlag(FLAGS_model)), &data,
      options);
  if (!worker.ok()) return worker.status();
  auto summary = (*worker)->Run(stop, [](const std::string&) {});
  if (!summary.ok()) return summary.status();
  const double seconds = absl::ToDoubleSeconds(timed_end - timed_start);
  const double steps = static_cast<double>(absl::GetFlag(FLAGS_steps));
  std::printf(
      "  ps run (%s): %lld steps, staleness %.2f, pull %.1f ms, push %.1f ms, "
      "compute %.1f ms\n",
      staleness_method.c_str(), static_cast<long long>(summary->steps - kWarmSteps),
      summary->mean_staleness, 1000 * pull_s / steps, 1000 * push_s / steps,
      1000 * compute_s / steps);
  return tokens / seconds;
}

// PyTorch eager on the same shape in a child process (so its thread pool
// and allocator are its own), with this run's batch, steps and threads.
absl::StatusOr<double> TorchTokensPerSecond(int threads, const std::string& dir) {
  static int run = 0;  // One log per run: the child appends to it.
  const std::string log = absl::StrCat(dir, "/torch_baseline_", run++, ".log");
  auto child = testing::ChildProcess::Start(
      {absl::GetFlag(FLAGS_python), absl::GetFlag(FLAGS_torch_baseline),
       "--model=" + absl::GetFlag(FLAGS_model),
       absl::StrCat("--batch=", absl::GetFlag(FLAGS_batch)),
       absl::StrCat("--seq_len=", absl::GetFlag(FLAGS_seq_len)),
       absl::StrCat("--steps=", absl::GetFlag(FLAGS_steps)), absl::StrCat("--threads=", threads)},
      log);
  if (!child.ok()) return child.status();
  auto code = (*child)->Wait(absl::Minutes(30));
  absl::StatusOr<std::string> read = ReadFile(log);
  if (!read.ok()) return read.status();
  const std::string& out = *read;
  if (!code.ok() || *code != 0) {
    return absl::InternalError(absl::StrCat("the PyTorch baseline failed:\n", out));
  }
  const size_t at = out.rfind("torch_tokens_per_s=");
  double tokens_per_s = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(absl::string_view(out).substr(at + 19)),
                        &tokens_per_s)) {
    return absl::InternalError(absl::StrCat("no torch_tokens_per_s in:\n", out));
  }
  std::printf("  %s", out.c_str());
  return tokens_per_s;
}

// Starts spotps-trainer --join_runs + 1 times against one shard, each for
// one step; the first run initialises the model, the others join a shard
// that holds it, as a spot worker joins a running job. Returns the median
// of their first_push_s (process start to first applied push).
absl::StatusOr<double> JoinSeconds(int threads, const std::string& tokens, const std::string& dir) {
  auto shards =
      testing::LocalShardCluster::Start(1,
                                        {"--optimizer=adamw", absl::StrCat("--lr=", kLr),
                                         "--staleness_method=" + absl::GetFlag(FLAGS_staleness_method)},
                                        dir);
  if (!shards.ok()) return shards.status();
  std::vector<double> joins;
  for (int run = 0; run <= std::max(1, absl::GetFlag(FLAGS_join_runs)); ++run) {
    std::vector<std::string> argv = {testing::BinaryPath("spotps-trainer"),
                                     "--ps=" + (*shards)->addresses(),
                                     "--model=" + absl::GetFlag(FLAGS_model),
                                     "--data=" + tokens,
                                     absl::StrCat("--batch=", absl::GetFlag(FLAGS_batch)),
                                     absl::StrCat("--seq_len=", absl::GetFlag(FLAGS_seq_len)),
                                     "--steps=1",
                                     "--coordinator=none",
                                     "--eval_batches=0",
                                     "--log_every=0",
                                     absl::StrCat("--threads=", threads),
                                     absl::StrCat("--worker_index=", run)};
    for (absl::string_view f :
         absl::StrSplit(absl::GetFlag(FLAGS_join_flags), ',', absl::SkipEmpty())) {
      argv.emplace_back(f);
    }
    const std::string log = absl::StrCat(dir, "/join_", run, ".log");
    auto child = testing::ChildProcess::Start(argv, log);
    if (!child.ok()) return child.status();
    auto code = (*child)->Wait(absl::Minutes(10));
    absl::StatusOr<std::string> out = ReadFile(log);
    if (!out.ok()) return out.status();
    const double seconds = testing::LogField(*out, "first_push_s");
    if (!code.ok() || *code != 0 || seconds <= 0) {
      return absl::InternalError(absl::StrCat("spotps-trainer failed:\n", *out));
    }
    const size_t at = out->find("join:");
    std::printf("  %s %s", run == 0 ? "(init)" : "join",
                out->substr(at, out->find('\n', at) - at + 1).c_str());
    if (run > 0) joins.push_back(seconds);
  }
  std::sort(joins.begin(), joins.end());
  return joins[joins.size() / 2];
}

double Bf16MatmulGflops() {
  torch::NoGradGuard no_grad;
  const int64_t n = 2048;
  auto a = torch::randn({n, n}).to(torch::kBFloat16);
  auto b = torch::randn({n, n}).to(torch::kBFloat16);
  torch::matmul(a, b);
  const int reps = 10;
  const absl::Time start = absl::Now();
  for (int i = 0; i < reps; ++i) torch::matmul(a, b);
  return 2.0 * n * n * n * reps / Seconds(start) / 1e9;
}

// The best rate of each side over the rounds so far.
struct BestRates {
  double bf16 = 0;         // Plain LibTorch BF16 training, tokens/s.
  double script = 0;       // The same loop on the TorchScript export, tokens/s.
  double matmul = 0;       // BF16 matmul, GFLOP/s.
  double ps = 0;           // spotps trainer + 1 shard, tokens/s.
  double fresh = 0;        // The same under the shard's default, "fresh".
  double torch_eager = 0;  // PyTorch eager, tokens/s.
};

// One round of (b)-(d); each side's rate replaces its best if higher.
absl::Status MeasureRound(const GptConfig& config, const TrainingData& data, int threads,
                          const std::string& script, const std::string& dir, BestRates& best) {
  auto bf16 = BuiltinTokensPerSecond(config, data, ComputeDType::kBF16);
  if (!bf16.ok()) return bf16.status();
  auto scripted = ScriptTokensPerSecond(script, data);
  if (!scripted.ok()) return scripted.status();
  // Right after the run it divides, so both see the same load from other
  // processes on a shared machine.
  const double matmul = Bf16MatmulGflops();
  auto ps = PsTokensPerSecond(config, data, dir, absl::GetFlag(FLAGS_staleness_method));
  if (!ps.ok()) return ps.status();
  auto fresh = PsTokensPerSecond(config, data, dir, "fresh");
  if (!fresh.ok()) return fresh.status();
  auto torch_eager = TorchTokensPerSecond(threads, dir);
  if (!torch_eager.ok()) return torch_eager.status();
  std::printf("  round: plain BF16 %.0f tokens/s, TorchScript %.0f tokens/s, matmul %.1f GFLOP/s, "
              "spotps %.0f tokens/s (fresh %.0f), PyTorch %.0f tokens/s\n",
              *bf16, *scripted, matmul, *ps, *fresh, *torch_eager);
  std::fflush(stdout);
  best.bf16 = std::max(best.bf16, *bf16);
  best.script = std::max(best.script, *scripted);
  best.matmul = std::max(best.matmul, matmul);
  best.ps = std::max(best.ps, *ps);
  best.fresh = std::max(best.fresh, *fresh);
  best.torch_eager = std::max(best.torch_eager, *torch_eager);
  return absl::OkStatus();
}

// Every problem with the flags, before anything starts.
UsageProblems FlagProblems() {
  UsageProblems problems;
  problems.Require(absl::GetFlag(FLAGS_steps) >= 1, "--steps must be at least 1");
  problems.Require(absl::GetFlag(FLAGS_batch) >= 1 && absl::GetFlag(FLAGS_seq_len) >= 1,
                   "--batch and --seq_len must be positive");
  problems.Require(absl::GetFlag(FLAGS_threads) >= 0, "--threads must not be negative");
  problems.Require(absl::GetFlag(FLAGS_shard_nice) >= 0 && absl::GetFlag(FLAGS_shard_nice) <= 19 &&
                       absl::GetFlag(FLAGS_transfer_nice) >= 0 &&
                       absl::GetFlag(FLAGS_transfer_nice) <= 19,
                   "--shard_nice and --transfer_nice must be in [0, 19]");
  return problems;
}

int Run() {
  ComputeRuntimeOptions runtime_options;
  runtime_options.threads = absl::GetFlag(FLAGS_threads);
  auto runtime = ConfigureComputeRuntime(runtime_options);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return 1;
  }
  std::printf("spotps-bench-trainer: %s\n", RuntimeLine(*runtime).c_str());
  testing::TempDir dir;
  auto tokens = MakeTokenFile(dir.path());
  if (!tokens.ok()) return std::fprintf(stderr, "%s\n", tokens.status().ToString().c_str()), 1;
  auto data = OpenTrainingData(*tokens, TokenFileFormat::kSpotps);
  auto config = GptConfigFromPreset(absl::GetFlag(FLAGS_model));
  if (!data.ok() || !config.ok()) return 1;
  const int64_t seq = absl::GetFlag(FLAGS_seq_len);
  std::printf("  model %s: %lld parameters, batch %lld x %lld tokens\n",
              absl::GetFlag(FLAGS_model).c_str(),
              static_cast<long long>(GptParameterCount(*config)),
              static_cast<long long>(absl::GetFlag(FLAGS_batch)), static_cast<long long>(seq));
  std::fflush(stdout);

  auto script = testing::ExportModel(
      dir.path(), "script",
      {"--arch=gpt2", absl::StrCat("--vocab_size=", config->vocab_size),
       absl::StrCat("--context_len=", config->context_len),
       absl::StrCat("--n_layer=", config->n_layer), absl::StrCat("--n_head=", config->n_head),
       absl::StrCat("--d_model=", config->d_model)});
  if (!script.ok()) return std::fprintf(stderr, "%s\n", script.status().ToString().c_str()), 1;
  auto fp32 = BuiltinTokensPerSecond(*config, **data, ComputeDType::kFP32);
  BestRates best;
  absl::Status rounds = fp32.status();
  for (int round = 0; rounds.ok() && round < std::max(1, absl::GetFlag(FLAGS_rounds)); ++round) {
    rounds = MeasureRound(*config, **data, runtime->threads, *script, dir.path(), best);
  }
  if (!rounds.ok()) return std::fprintf(stderr, "%s\n", rounds.ToString().c_str()), 1;
  auto join = JoinSeconds(runtime->threads, *tokens, dir.path());
  if (!join.ok()) return std::fprintf(stderr, "%s\n", join.status().ToString().c_str()), 1;
  // Forward+backward only: the plain BF16 loop's step also runs AdamW and
  // clipping, so this slightly understates the achieved rate.
  const double achieved = best.bf16 * FlopsPerToken(*config, seq) / 1e9;
  std::printf("\n| run | tokens/s |\n|---|---|\n");
  std::printf("| plain LibTorch, FP32 | %.0f |\n", *fp32);
  std::printf("| plain LibTorch, BF16 | %.0f |\n", best.bf16);
  std::printf("| plain LibTorch, BF16, the TorchScript export | %.0f |\n", best.script);
  std::printf("| spotps trainer + 1 shard, BF16 | %.0f |\n", best.ps);
  std::printf("| the same, the shard in its default mode (fresh) | %.0f |\n", best.fresh);
  std::printf("| PyTorch eager, BF16 autocast | %.0f |\n", best.torch_eager);
  std::printf("| BF16 matmul 2048^3 | %.1f GFLOP/s |\n", best.matmul);
  std::printf("| achieved (plain BF16 training) | %.1f GFLOP/s |\n\n", achieved);
  std::printf(
      "bf16_speedup=%.3f ps_efficiency=%.3f mfu_ratio=%.3f torch_ratio=%.3f first_push_s=%.3f "
      "script_ratio=%.3f fresh_efficiency=%.3f\n",
      best.bf16 / *fp32, best.ps / best.bf16, achieved / best.matmul, best.ps / best.torch_eager,
      *join, best.script / best.bf16, best.fresh / best.bf16);
  return 0;
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  spotps::SetLogProgramName("spotps-bench-trainer");
  spotps::ParseFlagsOrExit(argc, argv);
  if (spotps::UsageProblems problems = spotps::FlagProblems(); !problems.empty()) {
    return spotps::UsageError(problems.ToStatus());
  }
  if (spotps::CheckFlagsOnly()) return 0;
  spotps::TuneAllocatorForBulkTransfers();
  return spotps::Run();
}
