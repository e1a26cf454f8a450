// spotps-trainer: one stateless, preemptible training worker.
//
//   spotps-trainer --ps=127.0.0.1:7000,127.0.0.1:7001 --model=small --data=corpus.tokens
//
// Pulls weights, computes BF16 gradients with LibTorch and pushes them back
// asynchronously. SIGTERM or SIGINT drain it: it finishes the current step
// within --drain_deadline_s (or drops it), pushes its last gradient, commits
// or releases its work units, deregisters, prints a summary line and exits 0.
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "client/unreachable_wait.h"
#include "common/command_line.h"
#include "common/crash_report.h"
#include "common/exit_status.h"
#include "common/http_endpoint.h"
#include "common/log.h"
#include "common/metrics_registry.h"
#include "common/process_priority.h"
#include "common/security_flags.h"
#include "common/transport_args.h"
#include "common/usage_problems.h"
#include "trainer/elastic/graceful_drain.h"
#include "trainer/elastic/join_timeline.h"
#include "trainer/elastic/spot_notice_watcher.h"
#include "trainer/elastic/training_telemetry.h"
#include "trainer/elastic/training_worker.h"
#include "trainer/elastic/worker_membership.h"
#include "trainer/model/model_flags.h"
#include "trainer/model/torchscript_model.h"
#include "trainer/runtime/compute_runtime.h"

ABSL_FLAG(std::string, ps, "127.0.0.1:7000", "Shard addresses host:port,... in shard order.");
ABSL_FLAG(std::string, data, "", "Token file made by spotps-tokenize.");
ABSL_FLAG(std::string, data_format, "spotps",
          "spotps: a token file made by spotps-tokenize; raw_u16: a bare array of little-endian "
          "uint16 ids (nanoGPT's .bin), the last 5% held out for validation.");
ABSL_FLAG(int64_t, batch, 8, "Sequences per step.");
ABSL_FLAG(int64_t, seq_len, 128, "Tokens per sequence.");
ABSL_FLAG(int64_t, steps, 0, "Steps to train; 0: until --epochs or --max_seconds.");
ABSL_FLAG(double, epochs, 0, "Passes over the training tokens (converted to steps).");
ABSL_FLAG(double, max_seconds, 0, "Stop after this long; 0: no limit.");
ABSL_FLAG(uint64_t, seed, 1234, "Initial weights (same on every worker) and data seed.");
ABSL_FLAG(std::string, init_from, "",
          "safetensors file with Hugging Face GPT-2 names: the initial weights instead of "
          "--seed's (fine-tuning); shards that already hold the model keep theirs.");
ABSL_FLAG(int, worker_index, 0, "Distinguishes workers' data streams and log lines.");
ABSL_FLAG(double, clip_norm, 1.0, "Clip gradients to this global norm; 0: off.");
ABSL_FLAG(int64_t, log_every, 10, "Progress line every N steps.");
ABSL_FLAG(int64_t, eval_every, 0, "Validation loss every N steps; 0: only at the end.");
ABSL_FLAG(int64_t, eval_batches, 8, "Validation batches per evaluation; 0: none.");
ABSL_FLAG(bool, overlap, true, "Overlap pull/push with compute.");
ABSL_FLAG(bool, push_during_backward, true,
          "Where the push follows the step (the shards' default fresh mode, sync mode, "
          "--overlap=false): send each partition's gradient as soon as backward has produced it. "
          "false: after backward, all at once.");
ABSL_FLAG(std::string, push_dtype, "",
          "Wire type of pushed gradients: fp32, bf16, or int8 (blockwise, one scale per 256 "
          "elements, with error feedback kept by this trainer; about half of bf16's bytes; "
          "pushed after backward, not during it). Empty: the compute dtype's.");
ABSL_FLAG(bool, int8_error_feedback, true,
          "With --push_dtype=int8: add what a push's int8 codes could not carry to the next "
          "push. false drops it every push: only to measure what error feedback is worth.");
ABSL_FLAG(int64_t, first_step_batch, 1,
          "Join ramp: train the first unit in two steps, its first N sequences and then the "
          "rest, so that a newly started worker pushes its first gradient after a short step "
          "(docs/architecture.md, \"The trainer\"); 0 or >= --batch: off. Not in sync mode.");
ABSL_FLAG(double, inner_lr, 1e-3,
          "Local mode (shards with --consistency=local:H): learning rate of the AdamW this "
          "trainer applies to its own weights between pushes.");
ABSL_FLAG(double, inner_weight_decay, 0.01,
          "Local mode: that AdamW's decoupled weight decay.");
ABSL_FLAG(int, nice, 0,
          "Added to the whole trainer's nice value (0-19) before it starts computing: a trainer "
          "that shares a host with other work yields the CPU to it (--transfer_nice lowers its "
          "other threads further still). 0: unchanged.");
ABSL_FLAG(int, transfer_nice, 10,
          "Nice value (0-19) for this trainer's threads other than compute (pulls, pushes, "
          "BF16 conversion, gRPC), so that on a shared host they run in compute's gaps "
          "instead of stalling an OpenMP team; 0: off.");
ABSL_FLAG(double, ps_timeout_s, 120, "Keep retrying an unreachable cluster this long.");
ABSL_FLAG(double, rpc_deadline_s, 60,
          "Deadline of each attempt of an RPC to a shard or the coordinator (a stalled shard "
          "is retried after it).");
ABSL_FLAG(double, drain_deadline_s, 30,
          "After SIGTERM/SIGINT or a spot notice, finish the step within this, or drop it.");
ABSL_FLAG(std::string, spot_notice, "off",
          "Poll this cloud's instance-metadata service for a spot interruption notice and "
          "drain when one appears: aws (EC2 IMDSv2; rebalance recommendations are logged), "
          "gce, azure, or off.");
ABSL_FLAG(std::string, metadata_url, "http://169.254.169.254",
          "Instance-metadata endpoint for --spot_notice.");
ABSL_FLAG(double, spot_poll_s, 5, "Seconds between spot-notice polls.");
ABSL_FLAG(std::string, coordinator, "auto",
          "Work units from this coordinator (host:port); auto: shard 0 if it hosts one; "
          "none: train an endless stream of this worker's own samples.");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics at http://host:port/metrics (port 0 picks a free one). "
          "Empty: off.");

namespace {

using spotps::RuntimeError;
using spotps::UsageError;

// The staleness method shard 0 names in its Stats ("unknown" if it does not
// answer or predates the field), for the start line.
std::string ShardStalenessMethod(spotps::Cluster& cluster) {
  absl::StatusOr<std::vector<spotps::v1::StatsResponse>> stats = cluster.Stats();
  if (!stats.ok() || stats->empty() || (*stats)[0].staleness_method().empty()) return "unknown";
  return (*stats)[0].staleness_method();
}

// The coordinator to take work units from, or null to free-run. An
// unreachable one (shard 0 still starting) is waited for up to
// --ps_timeout_s.
absl::StatusOr<std::unique_ptr<spotps::CoordinatorClient>> ConnectCoordinator(
    const spotps::ChannelSecurity& security) {
  std::string address = absl::GetFlag(FLAGS_coordinator);
  if (address == "none") return nullptr;
  const bool optional = address == "auto";
  if (optional) {
    const std::string ps = absl::GetFlag(FLAGS_ps);
    address = ps.substr(0, ps.find(','));  // Shard 0 hosts the coordinator.
  }
  spotps::RetryPolicy policy;
  policy.deadline = absl::Seconds(absl::GetFlag(FLAGS_rpc_deadline_s));
  auto client = spotps::CoordinatorClient::Connect(address, policy, security);
  if (!client.ok()) return client;
  absl::StatusOr<spotps::v1::ProgressResponse> probe =
      spotps::UnreachableWait(absl::StrCat("the coordinator at ", address),
                              absl::Seconds(absl::GetFlag(FLAGS_ps_timeout_s)))
          .Retry<spotps::v1::ProgressResponse>([&] { return (*client)->Progress(); });
  if (probe.ok()) return client;
  if (optional && absl::IsUnimplemented(probe.status())) return nullptr;
  return probe.status();
}

// Every flag's value on its own and against the others; nothing is read or
// contacted.
// The spot-notice watcher's options from the flags (--spot_notice not
// "off"); INVALID_ARGUMENT for an unknown source, or a --metadata_url or
// --spot_poll_s the watcher would refuse.
absl::StatusOr<spotps::SpotNoticeWatcher::Options> SpotNoticeOptions() {
  absl::StatusOr<spotps::SpotNoticeSource> source =
      spotps::ParseSpotNoticeSource(absl::GetFlag(FLAGS_spot_notice));
  if (!source.ok()) return source.status();
  spotps::SpotNoticeWatcher::Options options;
  options.source = *source;
  options.metadata_url = absl::GetFlag(FLAGS_metadata_url);
  options.poll_interval = absl::Seconds(absl::GetFlag(FLAGS_spot_poll_s));
  // Create does no I/O: this checks the URL and the intervals.
  absl::Status valid =
      spotps::SpotNoticeWatcher::Create(options, [](const spotps::SpotNotice&) {}).status();
  if (!valid.ok()) return valid;
  return options;
}

void CheckFlags(const absl::StatusOr<spotps::GptConfig>& config, spotps::UsageProblems& problems) {
  problems.Require(!absl::GetFlag(FLAGS_data).empty(),
                   "--data is required: a token file or labeled-example file made by "
                   "spotps-tokenize");
  const int64_t batch = absl::GetFlag(FLAGS_batch), seq_len = absl::GetFlag(FLAGS_seq_len);
  problems.Require(batch > 0, absl::StrCat("--batch=", batch, " must be positive"));
  problems.Require(seq_len > 0, absl::StrCat("--seq_len=", seq_len, " must be positive"));
  if (config.ok() && !spotps::IsModelFile(absl::GetFlag(FLAGS_model))) {
    problems.Require(seq_len <= config->context_len,
                     absl::StrCat("--seq_len=", seq_len, " is longer than the model's context (",
                                  config->context_len, " tokens)"));
  }
  problems.Require(absl::GetFlag(FLAGS_steps) >= 0, "--steps must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_epochs) >= 0, "--epochs must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_max_seconds) >= 0, "--max_seconds must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_clip_norm) >= 0, "--clip_norm must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_eval_batches) >= 0, "--eval_batches must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_eval_every) >= 0, "--eval_every must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_log_every) >= 0, "--log_every must be >= 0");
  for (const auto& [name, value] :
       {std::pair<const char*, int>{"--nice", absl::GetFlag(FLAGS_nice)},
        {"--transfer_nice", absl::GetFlag(FLAGS_transfer_nice)}}) {
    problems.Require(value >= 0 && value <= 19, absl::StrCat(name, " must be in [0, 19]"));
  }
  problems.Require(absl::GetFlag(FLAGS_first_step_batch) >= 0, "--first_step_batch must be >= 0");
  if (const std::string d = absl::GetFlag(FLAGS_push_dtype); !d.empty()) {
    problems.Require(d == "fp32" || d == "bf16" || d == "int8",
                     absl::StrCat("--push_dtype=", d, ": want fp32, bf16, int8 or empty"));
  }
  const double inner_lr = absl::GetFlag(FLAGS_inner_lr);
  problems.Require(inner_lr > 0 && inner_lr < 1, "--inner_lr must be in (0, 1)");
  const double inner_decay = absl::GetFlag(FLAGS_inner_weight_decay);
  problems.Require(inner_decay >= 0 && inner_decay * inner_lr < 1,
                   "--inner_weight_decay must be >= 0, and below 1 / --inner_lr");
  problems.Require(absl::GetFlag(FLAGS_ps_timeout_s) >= 0, "--ps_timeout_s must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_rpc_deadline_s) > 0, "--rpc_deadline_s must be positive");
  problems.Require(absl::GetFlag(FLAGS_drain_deadline_s) >= 0, "--drain_deadline_s must be >= 0");
  problems.Require(absl::GetFlag(FLAGS_spot_poll_s) > 0, "--spot_poll_s must be positive");
  if (absl::GetFlag(FLAGS_spot_notice) != "off") {
    absl::StatusOr<spotps::SpotNoticeWatcher::Options> watch = SpotNoticeOptions();
    if (!watch.ok()) problems.Add(absl::StrCat("--spot_notice: ", watch.status().message()));
  }
  problems.Check(spotps::Cluster::Connect(absl::GetFlag(FLAGS_ps)).status());
  if (const std::string c = absl::GetFlag(FLAGS_coordinator); c != "auto" && c != "none") {
    problems.Require(c.find(':') != std::string::npos,
                     absl::StrCat("--coordinator=", c, ": want auto, none or host:port"));
  }
  if (const std::string m = absl::GetFlag(FLAGS_metrics_listen); !m.empty()) {
    if (absl::Status s = spotps::HttpEndpoint::CheckListenAddress(m); !s.ok()) {
      problems.Add(absl::StrCat("--metrics_listen: ", s.message()));
    }
  }
}

// Coordinated workers share one sample space that the units index; free
// workers each draw their own stream.
uint64_t DataSeed(bool coordinated) {
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const auto index = static_cast<uint64_t>(absl::GetFlag(FLAGS_worker_index));
  return coordinated ? seed : seed * 1000003u + index;
}

// Labeled examples come at the length they were tokenized to; token files
// are cut into --seq_len windows.
int64_t SeqLen(const spotps::TrainingData& data) {
  return data.fixed_seq_len() > 0 ? data.fixed_seq_len() : absl::GetFlag(FLAGS_seq_len);
}

// Everything but the data seed, which depends on whether a coordinator
// answers.
absl::StatusOr<spotps::TrainingOptions> OptionsFromFlags(const spotps::TrainingData& data,
                                                         spotps::ComputeDType dtype) {
  spotps::TrainingOptions o;
  o.dtype = dtype;
  o.batch_size = absl::GetFlag(FLAGS_batch);
  o.seq_len = SeqLen(data);
  o.max_steps = absl::GetFlag(FLAGS_steps);
  if (const double epochs = absl::GetFlag(FLAGS_epochs); epochs > 0 && o.max_steps == 0) {
    o.max_steps = std::max<int64_t>(
        1, static_cast<int64_t>(epochs * data.BatchesPerEpoch(o.batch_size, o.seq_len)));
  }
  o.max_time = absl::Seconds(absl::GetFlag(FLAGS_max_seconds));
  o.clip_norm = absl::GetFlag(FLAGS_clip_norm);
  const int index = absl::GetFlag(FLAGS_worker_index);
  o.log_every = absl::GetFlag(FLAGS_log_every);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_batches = absl::GetFlag(FLAGS_eval_batches);
  o.overlap = absl::GetFlag(FLAGS_overlap);
  o.push_during_backward = absl::GetFlag(FLAGS_push_during_backward);
  if (const std::string d = absl::GetFlag(FLAGS_push_dtype); !d.empty()) {
    o.push_dtype = d == "int8"   ? spotps::v1::DTYPE_INT8
                   : d == "bf16" ? spotps::v1::DTYPE_BF16
                                 : spotps::v1::DTYPE_FP32;
  }
  o.int8_error_feedback = absl::GetFlag(FLAGS_int8_error_feedback);
  o.first_step_batch = absl::GetFlag(FLAGS_first_step_batch);
  o.transfer_nice = absl::GetFlag(FLAGS_transfer_nice);
  o.inner.lr = static_cast<float>(absl::GetFlag(FLAGS_inner_lr));
  o.inner.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_inner_weight_decay));
  o.unavailable_timeout = absl::Seconds(absl::GetFlag(FLAGS_ps_timeout_s));
  o.name = absl::StrFormat("trainer-%d", index);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  // From the kernel's process start: the loader and LibTorch's static
  // initialisers are part of a worker's time to join.
  spotps::JoinTimeline join;
  absl::SetProgramUsageMessage("spotps training worker");
  spotps::InstallCrashReport(argv[0]);
  spotps::SetLogProgramName("spotps-trainer");
  spotps::ParseFlagsOrExit(argc, argv);
  // Before the threads that compute start, so that they inherit it;
  // AddNiceValue raises those libraries started already (out of range:
  // reported with the other problems below).
  if (const int nice = absl::GetFlag(FLAGS_nice);
      nice >= 0 && nice <= 19 && !spotps::CheckFlagsOnly()) {
    spotps::AddNiceValue(nice, "--nice");
  }
  // Signals are handled from the first moment: a trainer preempted while it
  // is still loading exits 0 like any other.
  std::unique_ptr<spotps::WorkerMembership> membership;
  spotps::GracefulDrain drain(absl::Seconds(absl::GetFlag(FLAGS_drain_deadline_s)), [&membership] {
    if (membership != nullptr) membership->Leave();
  });
  spotps::TuneAllocatorForBulkTransfers();
  // Every local input is checked, and every problem reported at once,
  // before anything goes over the network.
  spotps::UsageProblems problems;
  std::optional<spotps::ComputeRuntimeOptions> compute =
      problems.Take(spotps::ComputeRuntimeOptionsFromFlags());
  // A preset's sizes are flags; a file's are checked once it is loaded.
  const absl::StatusOr<spotps::GptConfig> config = spotps::GptConfigFromFlags();
  if (!spotps::IsModelFile(absl::GetFlag(FLAGS_model))) problems.Check(config.status());
  CheckFlags(config, problems);
  std::optional<spotps::ChannelSecurity> security =
      problems.Take(spotps::ChannelSecurityFromFlags());
  if (spotps::CheckFlagsOnly()) {
    return problems.empty() ? spotps::kExitSuccess : UsageError(problems.ToStatus());
  }
  if (compute.has_value()) {
    absl::StatusOr<spotps::ComputeRuntimeInfo> runtime = spotps::ConfigureComputeRuntime(*compute);
    if (!runtime.ok()) return RuntimeError(runtime.status());
    std::printf("%s\n", spotps::RuntimeLine(*runtime).c_str());
    std::fflush(stdout);
  }
  join.Mark("runtime");
  std::unique_ptr<spotps::TrainingData> data;
  std::optional<spotps::TokenFileFormat> format =
      problems.Take(spotps::ParseTokenFileFormat(absl::GetFlag(FLAGS_data_format)), "--data_format");
  if (const std::string path = absl::GetFlag(FLAGS_data); !path.empty() && format.has_value()) {
    data = problems.Take(spotps::OpenTrainingData(path, *format), "--data").value_or(nullptr);
  }
  // A file model, or one fine-tuned from --init_from, is the job's model
  // whatever the shards hold. A preset gets placeholder weights for the
  // checks: a worker joining a running job pulls its weights, and only a
  // first one draws them (below).
  const std::string init_from = absl::GetFlag(FLAGS_init_from);
  const bool final_model = spotps::IsModelFile(absl::GetFlag(FLAGS_model)) || !init_from.empty();
  std::unique_ptr<spotps::TrainableModel> model =
      problems
          .Take(spotps::ModelFromFlags(final_model ? std::optional<uint64_t>(absl::GetFlag(FLAGS_seed))
                                                   : std::nullopt))
          .value_or(nullptr);
  if (model != nullptr && !init_from.empty()) {
    if (auto loaded = problems.Take(model->LoadWeightsFile(init_from), "--init_from")) {
      spotps::LogInfo(*loaded);
    }
  }
  if (model != nullptr && data != nullptr && compute.has_value()) {
    problems.Check(spotps::ProbeModel(*model, *data, SeqLen(*data), compute->dtype));
  }
  if (!problems.empty()) return UsageError(problems.ToStatus());
  absl::StatusOr<spotps::TrainingOptions> options = OptionsFromFlags(*data, compute->dtype);
  if (!options.ok()) return UsageError(options.status());
  options->process_start = join.process_start();

  absl::StatusOr<std::unique_ptr<spotps::CoordinatorClient>> coordinator =
      ConnectCoordinator(*security);
  if (!coordinator.ok()) return RuntimeError(coordinator.status());
  options->data_seed = DataSeed(*coordinator != nullptr);
  join.Mark("coordinator");
  spotps::ClusterOptions cluster_options;
  cluster_options.retry.deadline = absl::Seconds(absl::GetFlag(FLAGS_rpc_deadline_s));
  cluster_options.security = *security;
  absl::StatusOr<std::unique_ptr<spotps::Cluster>> cluster =
      spotps::Cluster::Connect(absl::GetFlag(FLAGS_ps), cluster_options);
  if (!cluster.ok()) return RuntimeError(cluster.status());
  join.Mark("connect");
  // Joining a running job (the shards hold the model): the weights come
  // from the first pull, so a preset keeps its placeholders.
  if (!final_model && !(*cluster)->FetchLayout().ok()) {
    absl::StatusOr<std::unique_ptr<spotps::TrainableModel>> drawn =
        spotps::ModelFromFlags(absl::GetFlag(FLAGS_seed));
    if (!drawn.ok()) return RuntimeError(drawn.status());
    model = *std::move(drawn);
  }
  join.Mark("model");
  if (*coordinator != nullptr) {
    auto joined = spotps::WorkerMembership::Join(
        coordinator->get(), options->name,
        static_cast<uint64_t>(options->batch_size * options->seq_len), options->unavailable_timeout);
    if (!joined.ok()) return RuntimeError(joined.status());
    membership = *std::move(joined);
  }
  join.Mark("register");
  // Metrics on --metrics_listen and loss reports to the coordinator.
  spotps::MetricsRegistry metrics_registry;
  std::unique_ptr<spotps::HttpEndpoint> metrics_endpoint;
  const bool serve_metrics = !absl::GetFlag(FLAGS_metrics_listen).empty();
  spotps::TrainingTelemetry telemetry(serve_metrics ? &metrics_registry : nullptr,
                                      coordinator->get(), membership.get(), options->name,
                                      [&drain] { return drain.draining(); });
  options->on_step = [&telemetry](const spotps::StepRecord& r) { telemetry.OnStep(r); };
  options->on_eval = [&telemetry](int64_t steps, const spotps::Evaluation& e) {
    telemetry.OnEval(steps, e);
  };
  if (serve_metrics) {
    auto endpoint = spotps::HttpEndpoint::Start(
        absl::GetFlag(FLAGS_metrics_listen),
        {{"/metrics", [&metrics_registry] {
            return spotps::HttpReply{200, "text/plain; version=0.0.4; charset=utf-8",
                                     metrics_registry.Render()};
          }}});
    if (!endpoint.ok()) return RuntimeError(endpoint.status());
    metrics_endpoint = *std::move(endpoint);
    std::printf("[%s] metrics on port %d\n", options->name.c_str(), metrics_endpoint->port());
  }
  absl::StatusOr<std::unique_ptr<spotps::TrainingWorker>> worker = spotps::TrainingWorker::Create(
      cluster->get(), std::move(model), data.get(), *options,
      {coordinator->get(), membership.get()});
  // The shards train another model (the wrong --model): bad usage.
  if (!worker.ok() && absl::IsInvalidArgument(worker.status())) return UsageError(worker.status());
  if (!worker.ok()) return RuntimeError(worker.status());
  join.Mark("init");
  const std::string local_steps =
      membership != nullptr && membership->local_steps() > 0
          ? absl::StrFormat(", local steps %d (inner AdamW lr %g)", membership->local_steps(),
                            options->inner.lr)
          : "";
  std::printf("[%s] model %s: %s, task %s, %lld units an epoch, staleness_method=%s%s\n",
              options->name.c_str(), absl::GetFlag(FLAGS_model).c_str(),
              (*cluster)->layout().Summary().c_str(), spotps::TaskName(data->task()),
              static_cast<long long>(data->BatchesPerEpoch(options->batch_size, options->seq_len)),
              ShardStalenessMethod(**cluster).c_str(), local_steps.c_str());
  std::fflush(stdout);

  std::unique_ptr<spotps::SpotNoticeWatcher> spot_watcher;
  if (absl::GetFlag(FLAGS_spot_notice) != "off") {
    absl::StatusOr<spotps::SpotNoticeWatcher::Options> watch = SpotNoticeOptions();
    if (!watch.ok()) return UsageError(watch.status());
    watch->on_rebalance = [](const spotps::SpotNotice& n) {
      std::printf(
          "spotps-trainer: EC2 rebalance recommendation (notice time %s): this instance is at "
          "elevated risk of interruption; a replacement trainer started now keeps the pace\n",
          n.time.empty() ? "unknown" : n.time.c_str());
      std::fflush(stdout);
    };
    const std::string source = absl::GetFlag(FLAGS_spot_notice);
    auto watcher = spotps::SpotNoticeWatcher::Create(
        *watch, [&drain, source](const spotps::SpotNotice& n) {
          drain.Begin(absl::StrCat("spot notice from ", source, " (", n.action,
                                   n.time.empty() ? "" : " at ", n.time, ")"));
        });
    if (!watcher.ok()) return RuntimeError(watcher.status());
    spot_watcher = *std::move(watcher);
    spot_watcher->Start();
  }
  absl::StatusOr<spotps::TrainingSummary> summary =
      (*worker)->Run(drain.stop_flag(), [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      });
  drain.Finished();
  telemetry.Finish();
  if (spot_watcher != nullptr) spot_watcher->Stop();
  if (membership != nullptr) membership->Leave();
  // Shards other than shard 0 would otherwise count this trainer as live
  // (and hold averaged updates for it) until it had been silent a while.
  // Best effort: a shard that misses it still stops counting it then.
  (*cluster)->Leave().IgnoreError();
  // A model whose loss is not finite (a broken file): bad usage.
  if (!summary.ok() && absl::IsInvalidArgument(summary.status())) {
    return UsageError(summary.status());
  }
  if (!summary.ok()) return RuntimeError(summary.status());
  // The rest of the way to the first push happened inside Run.
  join.Add("first_pull", absl::Seconds(summary->first_pull_s));
  join.Add("first_compute", absl::Seconds(summary->first_compute_s));
  join.Add("first_push_rpc", absl::Seconds(summary->first_push_rpc_s));
  std::printf("%s first_push_s=%.3f\n", join.Line().c_str(), summary->first_push_s);
  // "-" when no validation ran (--eval_batches=0), rather than "nan".
  const std::string val_loss =
      std::isfinite(summary->val_loss) ? absl::StrFormat("%.4f", summary->val_loss) : "-";
  // Classification also says how often the model is right.
  const std::string val_accuracy =
      summary->val_accuracy >= 0 ? absl::StrFormat(" val_accuracy=%.4f", summary->val_accuracy) : "";
  std::printf(
      "summary: worker=%s steps=%lld tokens=%lld seconds=%.1f tokens_per_s=%.0f train_loss=%.4f "
      "val_loss=%s%s staleness=%.2f pull_ms=%.1f push_ms=%.1f compute_ms=%.1f dropped=%lld "
      "units=%lld job_done=%d first_push_s=%.2f drain_ms=%.0f\n",
      options->name.c_str(), static_cast<long long>(summary->steps),
      static_cast<long long>(summary->tokens), summary->seconds, summary->tokens_per_s,
      summary->last_train_loss, val_loss.c_str(), val_accuracy.c_str(), summary->mean_staleness,
      summary->mean_pull_ms,
      summary->mean_push_ms, summary->mean_compute_ms,
      static_cast<long long>(summary->pushes_dropped),
      static_cast<long long>(summary->units_committed), summary->job_done ? 1 : 0,
      summary->first_push_s, absl::ToDoubleMilliseconds(drain.drain_time()));
  std::fflush(stdout);  // The summary is the line scripts look for.
  return 0;
}
