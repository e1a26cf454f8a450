// spotps-trainer: one stateless, preemptible training worker.
//
//   spotps-trainer --ps=127.0.0.1:7000,127.0.0.1:7001 --model=small --data=corpus.tokens
//
// Pulls weights, computes BF16 gradients with LibTorch and pushes them back
// asynchronously. SIGTERM or SIGINT stop it after the current step, with its
// last gradient pushed; it then prints a summary line and exits 0.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "client/cluster.h"
#include "client/transport_args.h"
#include "trainer/compute_runtime.h"
#include "trainer/model_flags.h"
#include "trainer/training_worker.h"

ABSL_FLAG(std::string, ps, "127.0.0.1:7000", "Shard addresses host:port,... in shard order.");
ABSL_FLAG(std::string, data, "", "Token file made by spotps-tokenize.");
ABSL_FLAG(std::string, dtype, "bf16", "Compute precision: bf16 or fp32.");
ABSL_FLAG(int64_t, batch, 8, "Sequences per step.");
ABSL_FLAG(int64_t, seq_len, 128, "Tokens per sequence.");
ABSL_FLAG(int64_t, steps, 0, "Steps to train; 0: until --epochs or --max_seconds.");
ABSL_FLAG(double, epochs, 0, "Passes over the training tokens (converted to steps).");
ABSL_FLAG(double, max_seconds, 0, "Stop after this long; 0: no limit.");
ABSL_FLAG(int, threads, 0, "Intra-op threads; 0: one per physical core.");
ABSL_FLAG(uint64_t, seed, 1234, "Initial weights (same on every worker) and data seed.");
ABSL_FLAG(int, worker_index, 0, "Distinguishes workers' data streams and log lines.");
ABSL_FLAG(double, clip_norm, 1.0, "Clip gradients to this global norm; 0: off.");
ABSL_FLAG(int64_t, log_every, 10, "Progress line every N steps.");
ABSL_FLAG(int64_t, eval_every, 0, "Validation loss every N steps; 0: only at the end.");
ABSL_FLAG(int64_t, eval_batches, 8, "Validation batches per evaluation; 0: none.");
ABSL_FLAG(bool, overlap, true, "Overlap pull/push with compute.");
ABSL_FLAG(double, ps_timeout_s, 120, "Keep retrying an unreachable cluster this long.");

namespace {

spotps::ComputeRuntimeOptions RuntimeOptions(spotps::ComputeDType dtype) {
  spotps::ComputeRuntimeOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  options.dtype = dtype;
  return options;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "spotps-trainer: %s\n", s.ToString().c_str());
  return 1;
}

absl::StatusOr<spotps::TrainingOptions> OptionsFromFlags(const spotps::TokenDataset& data) {
  spotps::TrainingOptions o;
  absl::StatusOr<spotps::ComputeDType> dtype = spotps::ParseComputeDType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  o.dtype = *dtype;
  o.batch_size = absl::GetFlag(FLAGS_batch);
  o.seq_len = absl::GetFlag(FLAGS_seq_len);
  o.max_steps = absl::GetFlag(FLAGS_steps);
  if (const double epochs = absl::GetFlag(FLAGS_epochs); epochs > 0 && o.max_steps == 0) {
    o.max_steps = std::max<int64_t>(
        1, static_cast<int64_t>(epochs * data.num_train_tokens() / (o.batch_size * o.seq_len)));
  }
  o.max_time = absl::Seconds(absl::GetFlag(FLAGS_max_seconds));
  o.clip_norm = absl::GetFlag(FLAGS_clip_norm);
  const int index = absl::GetFlag(FLAGS_worker_index);
  o.data_seed = absl::GetFlag(FLAGS_seed) * 1000003u + static_cast<uint64_t>(index);
  o.log_every = absl::GetFlag(FLAGS_log_every);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_batches = absl::GetFlag(FLAGS_eval_batches);
  o.overlap = absl::GetFlag(FLAGS_overlap);
  o.unavailable_timeout = absl::Seconds(absl::GetFlag(FLAGS_ps_timeout_s));
  o.name = absl::StrFormat("trainer-%d", index);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("spotps training worker");
  absl::ParseCommandLine(argc, argv);
  spotps::TuneAllocatorForBulkTransfers();
  absl::StatusOr<spotps::ComputeDType> dtype = spotps::ParseComputeDType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(dtype.status());
  absl::StatusOr<spotps::ComputeRuntimeInfo> runtime =
      spotps::ConfigureComputeRuntime(RuntimeOptions(*dtype));
  if (!runtime.ok()) return Fail(runtime.status());
  std::printf("%s\n", spotps::RuntimeLine(*runtime).c_str());
  std::fflush(stdout);

  if (absl::GetFlag(FLAGS_data).empty()) return Fail(absl::InvalidArgumentError("--data is required"));
  absl::StatusOr<spotps::TokenDataset> data = spotps::TokenDataset::Open(absl::GetFlag(FLAGS_data));
  if (!data.ok()) return Fail(data.status());
  absl::StatusOr<spotps::TrainingOptions> options = OptionsFromFlags(*data);
  if (!options.ok()) return Fail(options.status());
  absl::StatusOr<spotps::GptConfig> config = spotps::GptConfigFromFlags();
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<spotps::GptModel> model = spotps::CreateGptModel(*config, absl::GetFlag(FLAGS_seed));
  if (!model.ok()) return Fail(model.status());

  absl::StatusOr<std::unique_ptr<spotps::Cluster>> cluster =
      spotps::Cluster::Connect(absl::GetFlag(FLAGS_ps));
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<std::unique_ptr<spotps::TrainingWorker>> worker =
      spotps::TrainingWorker::Create(cluster->get(), *model, &*data, *options);
  if (!worker.ok()) return Fail(worker.status());
  std::printf("[%s] model %s: %s, %d train tokens\n", options->name.c_str(),
              absl::GetFlag(FLAGS_model).c_str(), (*cluster)->layout().Summary().c_str(),
              static_cast<int>(data->num_train_tokens()));
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (!ec) stop = true;
  });
  std::thread signal_thread([&io] { io.run(); });
  absl::StatusOr<spotps::TrainingSummary> summary =
      (*worker)->Run(stop, [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      });
  io.stop();
  signal_thread.join();
  if (!summary.ok()) return Fail(summary.status());
  std::printf(
      "summary: worker=%s steps=%lld tokens=%lld seconds=%.1f tokens_per_s=%.0f train_loss=%.4f "
      "val_loss=%.4f staleness=%.2f pull_ms=%.1f push_ms=%.1f compute_ms=%.1f dropped=%lld\n",
      options->name.c_str(), static_cast<long long>(summary->steps),
      static_cast<long long>(summary->tokens), summary->seconds, summary->tokens_per_s,
      summary->last_train_loss, summary->val_loss, summary->mean_staleness, summary->mean_pull_ms,
      summary->mean_push_ms, summary->mean_compute_ms,
      static_cast<long long>(summary->pushes_dropped));
  return 0;
}
