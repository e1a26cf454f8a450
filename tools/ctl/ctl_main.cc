// spotps-ctl: look at and steer a running spotps job from a shell.
//
//   spotps-ctl --ps=host:port,... status [--json] [--sample_s=1] [--tokens_per_push=N]
//   spotps-ctl --ps=host:port,... checkpoint
//   spotps-ctl --ps=host:port,... wait-done [--timeout_s=600]
//   spotps-ctl --ps=host:port,... export --out=model.safetensors [--dtype=fp32|bf16]
//   spotps-ctl --ps=host:port,... import --in=model.safetensors
//
// Every RPC goes through the client library, so it has a deadline and
// bounded retries. Exit status: 0 success, 1 the cluster failed or refused,
// 2 bad usage, so that a script can tell a typo from a sick cluster.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/command_line.h"
#include "common/crash_report.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/security_flags.h"
#include "tools/ctl/cluster_status.h"
#include "tools/ctl/ctl_usage.h"
#include "tools/ctl/safetensors_transfer.h"
#include "tools/ctl/status_format.h"

ABSL_FLAG(std::string, ps, "", "Shard addresses host:port,... in shard order (required).");
ABSL_FLAG(bool, json, false, "status: print one JSON object instead of tables.");
ABSL_FLAG(double, sample_s, 1.0,
          "status: seconds between the two Stats samples that give the push rate; 0: no rate.");
ABSL_FLAG(int64_t, tokens_per_push, 0,
          "status: tokens per trainer step (batch x seq_len), to turn pushes/s into tokens/s.");
ABSL_FLAG(double, timeout_s, 600, "wait-done: give up (exit 1) after this long.");
ABSL_FLAG(double, print_every_s, 5, "wait-done: seconds between progress lines.");
ABSL_FLAG(std::string, out, "", "export: the safetensors file to write (atomically).");
ABSL_FLAG(std::string, dtype, "fp32", "export: fp32 or bf16 (round to nearest even).");
ABSL_FLAG(std::string, in, "",
          "import: the safetensors file (Hugging Face GPT-2 names, or the model's own).");
ABSL_FLAG(std::string, names, "auto",
          "export: tensor names: hf (Hugging Face GPT-2), module (the model's own), or auto "
          "(hf for spotps's GPT, module for others).");
ABSL_FLAG(double, rpc_timeout_s, 10, "Deadline of each RPC attempt (failed attempts are retried).");

namespace spotps {
namespace {

// The flags `--help` lists, in this order.
constexpr absl::string_view kFlagNames[] = {
    "ps",        "json",          "sample_s",      "tokens_per_push",
    "timeout_s", "print_every_s", "rpc_timeout_s", "tls_ca",
    "tls_cert",  "tls_key",       "token_file",    "out",
    "dtype",     "names",         "in"};

RetryPolicy CtlRetryPolicy() {
  RetryPolicy policy;
  policy.deadline = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  return policy;
}

absl::StatusOr<std::unique_ptr<Cluster>> ConnectShards() {
  ClusterOptions options;
  options.retry = CtlRetryPolicy();
  options.pull_streams_per_shard = 1;  // spotps-ctl never pulls weights.
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  if (!security.ok()) return security.status();
  options.security = *std::move(security);
  return Cluster::Connect(absl::GetFlag(FLAGS_ps), options);
}

// Shard 0 hosts the coordinator, if the job has one.
absl::StatusOr<std::unique_ptr<CoordinatorClient>> ConnectCoordinator(const Cluster& cluster) {
  return CoordinatorClient::Connect(cluster.shard_address(0), CtlRetryPolicy(), cluster.security());
}

int BadUsage(absl::string_view message) {
  LogWarningF("%s (see spotps-ctl --help)", message);
  return kExitUsageError;
}

// ---------------------------------------------------------------------------
// Commands. Each returns the process exit status.

// Writes a line now: a script reading the pipe sees progress as it comes.
void PrintOut(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

int StatusCommand(Cluster& cluster) {
  StatusOptions options;
  options.sample = absl::Seconds(absl::GetFlag(FLAGS_sample_s));
  options.tokens_per_push = absl::GetFlag(FLAGS_tokens_per_push);
  options.retry = CtlRetryPolicy();
  absl::StatusOr<StatusReport> report = GatherStatus(cluster, options);
  if (!report.ok()) {
    return RuntimeError(absl::Status(
        report.status().code(),
        absl::StrCat("cannot read the cluster's status: ", report.status().message())));
  }
  const std::string out = absl::GetFlag(FLAGS_json) ? StatusJson(*report) : StatusText(*report);
  std::fputs(out.c_str(), stdout);
  // The shards answered, but a coordinator that exists and fails is trouble.
  return HasCoordinator(*report) || NoCoordinator(*report) ? 0 : kExitRuntimeError;
}

int CheckpointCommand(Cluster& cluster) {
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> coordinator = ConnectCoordinator(cluster);
  if (!coordinator.ok()) return RuntimeError(coordinator.status());
  absl::StatusOr<v1::CheckpointNowResponse> r = (*coordinator)->CheckpointNow();
  if (absl::IsUnimplemented(r.status())) {
    LogWarningF(
        "checkpoint: shard 0 (%s) does not implement Coordinator.CheckpointNow: it hosts no "
        "coordinator (start it with --epochs) or its spotps-ps predates checkpoints",
        cluster.shard_address(0));
    return kExitRuntimeError;
  }
  if (!r.ok()) return RuntimeError(r.status());
  std::printf("checkpoint: id=%llu seconds=%.2f\n",
              static_cast<unsigned long long>(r->checkpoint_id()), r->seconds());
  return 0;
}

// Prints a progress line, or the error that kept it away, at most every
// --print_every_s.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(absl::Time start)
      : start_(start), every_(absl::Seconds(absl::GetFlag(FLAGS_print_every_s))), next_(start) {}

  void Maybe(const absl::StatusOr<v1::ProgressResponse>& p) {
    const absl::Time now = absl::Now();
    if (now < next_) return;
    next_ = now + every_;
    if (p.ok()) {
      PrintOut(ProgressLine("progress", *p, now - start_));
    } else {
      LogWarningF("wait-done: %s (still waiting)", p.status().ToString());
    }
  }

 private:
  const absl::Time start_;
  const absl::Duration every_;
  absl::Time next_;
};

// The first Progress must succeed (there must be something to wait for);
// later failures are reported and waited out, because a shard that restarts
// from a checkpoint comes back.
int WaitDoneCommand(Cluster& cluster) {
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> coordinator = ConnectCoordinator(cluster);
  if (!coordinator.ok()) return RuntimeError(coordinator.status());
  const absl::Time start = absl::Now();
  const absl::Time give_up = start + absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  absl::StatusOr<v1::ProgressResponse> p = (*coordinator)->Progress();
  if (absl::IsUnimplemented(p.status())) {
    LogWarningF("wait-done: shard 0 (%s) hosts no coordinator: nothing to wait for",
                cluster.shard_address(0));
    return kExitRuntimeError;
  }
  if (!p.ok()) return RuntimeError(p.status());
  ProgressPrinter printer(start);
  while (!p.ok() || !p->done()) {
    if (absl::Now() >= give_up) {
      LogWarningF("wait-done: not done after %.0f s", absl::ToDoubleSeconds(absl::Now() - start));
      return kExitRuntimeError;
    }
    printer.Maybe(p);
    absl::SleepFor(std::min(absl::Seconds(1), give_up - absl::Now()));
    p = (*coordinator)->Progress();
  }
  PrintOut(ProgressLine("done", *p, absl::Now() - start));
  return 0;
}

int ExportCommand(Cluster& cluster) {
  const std::string path = absl::GetFlag(FLAGS_out);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (path.empty()) return BadUsage("export needs --out=FILE");
  if (dtype != "fp32" && dtype != "bf16") return BadUsage("--dtype must be fp32 or bf16");
  absl::StatusOr<TensorNaming> naming = ParseTensorNaming(absl::GetFlag(FLAGS_names));
  if (!naming.ok()) return BadUsage(naming.status().message());
  absl::StatusOr<TransferSummary> r = ExportSafetensors(
      cluster, path, dtype == "bf16" ? SafetensorsDType::kBF16 : SafetensorsDType::kF32, *naming);
  if (!r.ok()) return RuntimeError(r.status());
  std::printf("export: %s step=%llu dtype=%s -> %s\n", r->layout.c_str(),
              static_cast<unsigned long long>(r->global_step), dtype.c_str(), path.c_str());
  return 0;
}

int ImportCommand(Cluster& cluster) {
  const std::string path = absl::GetFlag(FLAGS_in);
  if (path.empty()) return BadUsage("import needs --in=FILE");
  absl::StatusOr<TransferSummary> r = ImportSafetensors(cluster, path);
  if (!r.ok()) return RuntimeError(r.status());
  std::printf("import: %s <- %s\n", r->layout.c_str(), path.c_str());
  return 0;
}

struct Command {
  absl::string_view name;
  int (*run)(Cluster& cluster);
};

constexpr Command kCommands[] = {{"status", StatusCommand},
                                 {"checkpoint", CheckpointCommand},
                                 {"wait-done", WaitDoneCommand},
                                 {"export", ExportCommand},
                                 {"import", ImportCommand}};

const Command* FindCommand(absl::string_view name) {
  for (const Command& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

int Run(int argc, char** argv) {
  InstallCrashReport(argv[0]);
  SetLogProgramName("spotps-ctl");
  if (WantsHelp(argc, argv)) {
    std::fputs(Usage(kFlagNames).c_str(), stdout);
    return 0;
  }
  absl::StatusOr<std::vector<std::string>> args = ParseFlags(argc, argv);
  if (!args.ok()) return BadUsage(args.status().message());
  if (PrintVersionIfAsked()) return kExitSuccess;
  if (args->size() != 1) {
    return BadUsage(args->empty()
                        ? "no command given"
                        : absl::StrCat("one command expected, got: ", absl::StrJoin(*args, " ")));
  }
  const Command* command = FindCommand((*args)[0]);
  if (command == nullptr) return BadUsage(absl::StrCat("unknown command '", (*args)[0], "'"));
  if (absl::GetFlag(FLAGS_ps).empty()) return BadUsage("--ps=host:port,... is required");
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = ConnectShards();
  if (!cluster.ok()) return BadUsage(cluster.status().message());
  if ((*cluster)->num_shards() == 0) return BadUsage("--ps names no shard");
  return command->run(**cluster);
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) { return spotps::Run(argc, argv); }
