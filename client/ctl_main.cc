// spotps-ctl: look at and steer a running spotps job from a shell.
//
//   spotps-ctl --ps=host:port,... status [--json] [--sample_s=1] [--tokens_per_push=N]
//   spotps-ctl --ps=host:port,... checkpoint
//   spotps-ctl --ps=host:port,... wait-done [--timeout_s=600]
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

ABSL_FLAG(std::string, ps, "", "Shard addresses host:port,... in shard order (required).");
ABSL_FLAG(bool, json, false, "status: print one JSON object instead of tables.");
ABSL_FLAG(double, sample_s, 1.0,
          "status: seconds between the two Stats samples that give the push rate; 0: no rate.");
ABSL_FLAG(int64_t, tokens_per_push, 0,
          "status: tokens per trainer step (batch x seq_len), to turn pushes/s into tokens/s.");
ABSL_FLAG(double, timeout_s, 600, "wait-done: give up (exit 1) after this long.");
ABSL_FLAG(double, print_every_s, 5, "wait-done: seconds between progress lines.");
ABSL_FLAG(double, rpc_timeout_s, 10, "Deadline of each RPC attempt (failed attempts are retried).");

namespace spotps {
namespace {

constexpr int kRuntimeError = 1;
constexpr int kUsageError = 2;

// The flags `--help` lists, in this order.
constexpr absl::string_view kFlagNames[] = {
    "ps", "json", "sample_s", "tokens_per_push", "timeout_s", "print_every_s", "rpc_timeout_s"};

// ---------------------------------------------------------------------------
// Command line.

std::string Usage() {
  std::string text =
      "usage: spotps-ctl --ps=host:port,... <command> [flags]\n"
      "\n"
      "commands:\n"
      "  status      every shard in one table, the push rate, and the epochs and\n"
      "              live workers of the coordinator shard 0 hosts (if any)\n"
      "  checkpoint  asks shard 0's coordinator for a checkpoint round now\n"
      "  wait-done   waits until every epoch's work units are committed\n"
      "\n"
      "flags:\n";
  for (absl::string_view name : kFlagNames) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    absl::StrAppendFormat(&text, "  %-24s %s\n",
                          absl::StrCat("--", name, "=", flag->DefaultValue()), flag->Help());
  }
  absl::StrAppend(&text,
                  "\nexit status: 0 success, 1 the cluster failed or refused, 2 bad usage\n");
  return text;
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
  }
  return false;
}

struct FlagSetting {
  absl::CommandLineFlag* flag = nullptr;  // Null: no such flag.
  std::optional<std::string> value;       // None: the next argument is the value.
};

// Resolves "name=value", "name", or "noname" for a boolean flag.
FlagSetting ResolveFlag(absl::string_view spec) {
  std::pair<absl::string_view, absl::string_view> kv =
      absl::StrSplit(spec, absl::MaxSplits('=', 1));
  FlagSetting s{absl::FindCommandLineFlag(kv.first), std::nullopt};
  if (spec.find('=') != absl::string_view::npos) {
    s.value = std::string(kv.second);
  } else if (s.flag != nullptr) {
    if (s.flag->IsOfType<bool>()) s.value = "true";
  } else if (absl::string_view name = kv.first; absl::ConsumePrefix(&name, "no")) {
    absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name);
    if (negated != nullptr && negated->IsOfType<bool>()) s = {negated, "false"};
  }
  return s;
}

// Sets the flag that `arg` ("--name=value", "--name value", "--[no]bool")
// names; *next_arg moves past a value taken from the next argument.
absl::Status ApplyFlag(absl::string_view arg, int argc, char** argv, int* next_arg) {
  FlagSetting s = ResolveFlag(absl::StripPrefix(absl::StripPrefix(arg, "-"), "-"));
  if (s.flag == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
  }
  if (!s.value.has_value()) {
    if (*next_arg >= argc) {
      return absl::InvalidArgumentError(absl::StrCat("flag '", arg, "' needs a value"));
    }
    s.value = argv[(*next_arg)++];
  }
  std::string error;
  if (!s.flag->ParseFrom(*s.value, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad value for --", s.flag->Name(), ": ", error));
  }
  return absl::OkStatus();
}

// Applies the flags and returns the other arguments. Not absl::ParseCommandLine:
// it exits 1 on a bad flag, and a bad flag is a usage error (2) here.
absl::StatusOr<std::vector<std::string>> ParseArgs(int argc, char** argv) {
  std::vector<std::string> positional;
  int i = 1;
  while (i < argc) {
    const absl::string_view arg = argv[i++];
    if (arg == "--") {
      positional.insert(positional.end(), argv + i, argv + argc);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.emplace_back(arg);
      continue;
    }
    if (absl::Status s = ApplyFlag(arg, argc, argv, &i); !s.ok()) return s;
  }
  return positional;
}

RetryPolicy CtlRetryPolicy() {
  RetryPolicy policy;
  policy.deadline = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  return policy;
}

absl::StatusOr<std::unique_ptr<Cluster>> ConnectShards() {
  ClusterOptions options;
  options.retry = CtlRetryPolicy();
  options.pull_streams_per_shard = 1;  // spotps-ctl never pulls weights.
  return Cluster::Connect(absl::GetFlag(FLAGS_ps), options);
}

// Shard 0 hosts the coordinator, if the job has one.
absl::StatusOr<std::unique_ptr<CoordinatorClient>> ConnectCoordinator(const Cluster& cluster) {
  return CoordinatorClient::Connect(cluster.shard_address(0), CtlRetryPolicy());
}

// ---------------------------------------------------------------------------
// What `status` reports.

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

bool HasCoordinator(const StatusReport& r) { return r.progress.ok(); }

bool NoCoordinator(const StatusReport& r) { return absl::IsUnimplemented(r.progress.status()); }

// A trainer step pushes one gradient to every shard, so the job's step rate
// is the fastest shard's rate, not the sum. A shard that restarted between
// the samples (new incarnation) says nothing about the rate and is left out.
Throughput MeasureThroughput(const std::vector<v1::StatsResponse>& before,
                             const std::vector<v1::StatsResponse>& after, double seconds) {
  Throughput t;
  t.sampled = true;
  t.seconds = seconds;
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    if (before[i].incarnation() != after[i].incarnation()) continue;
    if (after[i].pushes_applied() < before[i].pushes_applied()) continue;
    const double rate = (after[i].pushes_applied() - before[i].pushes_applied()) / seconds;
    t.pushes_per_s = std::max(t.pushes_per_s, rate);
  }
  if (const int64_t tokens = absl::GetFlag(FLAGS_tokens_per_push); tokens > 0) {
    t.tokens_per_s = t.pushes_per_s * static_cast<double>(tokens);
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

absl::StatusOr<StatusReport> GatherStatus(Cluster& cluster) {
  StatusReport report;
  for (size_t i = 0; i < cluster.num_shards(); ++i) {
    report.addresses.push_back(cluster.shard_address(i));
  }
  const absl::Time first_time = absl::Now();
  absl::StatusOr<std::vector<v1::StatsResponse>> first = cluster.Stats();
  if (!first.ok()) return first.status();
  report.shards = *first;
  if (const double sample_s = absl::GetFlag(FLAGS_sample_s); sample_s > 0) {
    absl::SleepFor(absl::Seconds(sample_s));
    const absl::Time second_time = absl::Now();
    absl::StatusOr<std::vector<v1::StatsResponse>> second = cluster.Stats();
    if (!second.ok()) return second.status();
    report.shards = *second;
    report.throughput =
        MeasureThroughput(*first, *second, absl::ToDoubleSeconds(second_time - first_time));
  }
  report.warnings = ShardOrderWarnings(report.shards);
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> coordinator = ConnectCoordinator(cluster);
  if (!coordinator.ok()) return coordinator.status();
  report.progress = (*coordinator)->Progress();
  return report;
}

struct VersionRange {
  uint64_t min = 0;
  uint64_t max = 0;
};

VersionRange PartitionVersions(const v1::StatsResponse& s) {
  if (s.partitions().empty()) return {};
  VersionRange r{~uint64_t{0}, 0};
  for (const v1::PartitionStats& p : s.partitions()) {
    r.min = std::min(r.min, p.version());
    r.max = std::max(r.max, p.version());
  }
  return r;
}

// ---------------------------------------------------------------------------
// Plain text.

// Pads every column to its widest cell; the first row is the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, " ", row[c], std::string(widths[c] - row[c].size(), ' '));
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  constexpr absl::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, "B") : absl::StrFormat("%.1f%s", value, kUnits[unit]);
}

std::vector<std::string> ShardRow(size_t index, const std::string& address,
                                  const v1::StatsResponse& s) {
  const VersionRange versions = PartitionVersions(s);
  return {absl::StrCat(index),
          address,
          s.initialized() ? "yes" : "no",
          absl::StrCat(s.global_step()),
          absl::StrCat(s.pushes_applied()),
          absl::StrCat(s.pushes_duplicate()),
          absl::StrCat(s.pushes_rejected()),
          absl::StrFormat("%.2f", s.mean_staleness()),
          absl::StrFormat("%.3g", s.learning_rate()),
          HumanBytes(s.bytes_in()),
          HumanBytes(s.bytes_out()),
          absl::StrCat(versions.min),
          absl::StrCat(versions.max),
          absl::StrFormat("%016x", s.incarnation()),
          absl::StrCat(s.restored_checkpoint_id()),
          absl::StrCat(s.last_checkpoint_id())};
}

std::string ShardsText(const StatusReport& r) {
  std::vector<std::vector<std::string>> rows = {
      {"shard", "address", "init", "global_step", "applied", "duplicate", "rejected", "staleness",
       "lr", "bytes_in", "bytes_out", "pver_min", "pver_max", "incarnation", "restored_ckpt",
       "last_ckpt"}};
  for (size_t i = 0; i < r.shards.size(); ++i) {
    rows.push_back(ShardRow(i, r.addresses[i], r.shards[i]));
  }
  std::string out = absl::StrCat("shards: ", r.shards.size(), "\n", FormatTable(rows));
  for (const std::string& w : r.warnings) absl::StrAppend(&out, "warning: ", w, "\n");
  return out;
}

std::string ThroughputText(const Throughput& t) {
  if (!t.sampled) return "throughput: not sampled (--sample_s=0)\n";
  std::string line = absl::StrFormat("throughput: pushes_per_s=%.2f", t.pushes_per_s);
  if (t.tokens_per_s >= 0) {
    absl::StrAppendFormat(&line, " tokens_per_s=%.0f", t.tokens_per_s);
  }
  absl::StrAppendFormat(&line, " over %.2fs", t.seconds);
  if (t.tokens_per_s < 0) absl::StrAppend(&line, " (--tokens_per_push=N gives tokens/s)");
  return line + "\n";
}

std::string EpochsTable(const v1::ProgressResponse& p) {
  std::vector<std::vector<std::string>> rows = {
      {"epoch", "units", "committed", "leased", "reissued", "duplicated"}};
  for (const v1::EpochProgress& e : p.epochs()) {
    rows.push_back({absl::StrCat(e.epoch()), absl::StrCat(e.units()), absl::StrCat(e.committed()),
                    absl::StrCat(e.leased()), absl::StrCat(e.reissued()),
                    absl::StrCat(e.duplicated())});
  }
  return FormatTable(rows);
}

std::string WorkersTable(const v1::ProgressResponse& p) {
  std::vector<std::vector<std::string>> rows = {
      {"worker_id", "name", "units_committed", "ms_since_heartbeat"}};
  for (const v1::WorkerStatus& w : p.workers()) {
    rows.push_back({absl::StrCat(w.worker_id()), w.name(), absl::StrCat(w.units_committed()),
                    absl::StrCat(w.ms_since_heartbeat())});
  }
  return FormatTable(rows);
}

// "async", "ssp:S" or "sync", as spotps-ps --consistency spells it.
std::string ConsistencyOf(const v1::ProgressResponse& p) {
  switch (p.consistency()) {
    case v1::CONSISTENCY_SSP:
      return absl::StrCat("ssp:", p.ssp_bound());
    case v1::CONSISTENCY_SYNC:
      return "sync";
    default:
      return "async";
  }
}

std::string SyncRoundsText(const v1::ProgressResponse& p) {
  if (p.consistency() != v1::CONSISTENCY_SYNC) return "";
  return absl::StrFormat("sync rounds: applied=%d abandoned=%d open=%d gradients_in_open=%d\n",
                         p.sync_rounds_applied(), p.sync_rounds_abandoned(), p.sync_round(),
                         p.sync_round_contributions());
}

std::string CoordinatorText(const StatusReport& r) {
  if (NoCoordinator(r)) return "coordinator: none (shard 0 hosts no coordinator)\n";
  if (!HasCoordinator(r)) {
    return absl::StrCat("coordinator: error: ", r.progress.status().message(), "\n");
  }
  const v1::ProgressResponse& p = *r.progress;
  return absl::StrCat(
      absl::StrFormat("coordinator: current_epoch=%d num_epochs=%d done=%s consistency=%s\n",
                      p.current_epoch(), p.num_epochs(), p.done() ? "yes" : "no",
                      ConsistencyOf(p)),
      EpochsTable(p), SyncRoundsText(p),
      absl::StrFormat("workers: live=%d expired=%d\n", p.workers_size(), p.workers_expired()),
      p.workers().empty() ? "" : WorkersTable(p));
}

std::string StatusText(const StatusReport& r) {
  return absl::StrCat(ShardsText(r), ThroughputText(r.throughput), CoordinatorText(r));
}

// ---------------------------------------------------------------------------
// JSON, written by hand (one object; keys in a fixed order).

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.6g", v) : std::string("null");
}

std::string JsonBool(bool v) { return v ? "true" : "false"; }

// Fields are "key" and an already-encoded JSON value.
using JsonFields = std::vector<std::pair<absl::string_view, std::string>>;

std::string JsonObject(const JsonFields& fields) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : fields) {
    parts.push_back(absl::StrCat(JsonString(key), ":", value));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string JsonArray(const std::vector<std::string>& items) {
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string ShardJson(size_t index, const std::string& address, const v1::StatsResponse& s) {
  const VersionRange versions = PartitionVersions(s);
  return JsonObject({
      {"index", absl::StrCat(index)},
      {"address", JsonString(address)},
      {"initialized", JsonBool(s.initialized())},
      {"shard_index", absl::StrCat(s.shard_index())},
      {"num_shards", absl::StrCat(s.num_shards())},
      {"global_step", absl::StrCat(s.global_step())},
      {"pushes_applied", absl::StrCat(s.pushes_applied())},
      {"pushes_duplicate", absl::StrCat(s.pushes_duplicate())},
      {"pushes_rejected", absl::StrCat(s.pushes_rejected())},
      {"pushes_too_stale", absl::StrCat(s.pushes_too_stale())},
      {"pulls", absl::StrCat(s.pulls())},
      {"mean_staleness", JsonNumber(s.mean_staleness())},
      {"max_staleness", absl::StrCat(s.max_staleness())},
      {"learning_rate", JsonNumber(s.learning_rate())},
      {"bytes_in", absl::StrCat(s.bytes_in())},
      {"bytes_out", absl::StrCat(s.bytes_out())},
      {"partitions", absl::StrCat(s.partitions_size())},
      {"partition_version_min", absl::StrCat(versions.min)},
      {"partition_version_max", absl::StrCat(versions.max)},
      // A string: JSON numbers lose the low bits of a 64-bit value.
      {"incarnation", JsonString(absl::StrFormat("%016x", s.incarnation()))},
      {"restored_checkpoint_id", absl::StrCat(s.restored_checkpoint_id())},
      {"last_checkpoint_id", absl::StrCat(s.last_checkpoint_id())},
  });
}

std::string ThroughputJson(const Throughput& t) {
  if (!t.sampled) return "null";
  return JsonObject({{"seconds", JsonNumber(t.seconds)},
                     {"pushes_per_s", JsonNumber(t.pushes_per_s)},
                     {"tokens_per_s", t.tokens_per_s >= 0 ? JsonNumber(t.tokens_per_s) : "null"}});
}

std::string EpochsJson(const v1::ProgressResponse& p) {
  std::vector<std::string> epochs;
  for (const v1::EpochProgress& e : p.epochs()) {
    epochs.push_back(JsonObject({{"epoch", absl::StrCat(e.epoch())},
                                 {"units", absl::StrCat(e.units())},
                                 {"committed", absl::StrCat(e.committed())},
                                 {"leased", absl::StrCat(e.leased())},
                                 {"reissued", absl::StrCat(e.reissued())},
                                 {"duplicated", absl::StrCat(e.duplicated())}}));
  }
  return JsonArray(epochs);
}

std::string WorkersJson(const v1::ProgressResponse& p) {
  std::vector<std::string> workers;
  for (const v1::WorkerStatus& w : p.workers()) {
    workers.push_back(JsonObject({{"worker_id", absl::StrCat(w.worker_id())},
                                  {"name", JsonString(w.name())},
                                  {"units_committed", absl::StrCat(w.units_committed())},
                                  {"ms_since_heartbeat", absl::StrCat(w.ms_since_heartbeat())}}));
  }
  return JsonArray(workers);
}

std::string CoordinatorJson(const StatusReport& r) {
  if (!HasCoordinator(r)) {
    return JsonObject(
        {{"present", "false"},
         {"error", NoCoordinator(r) ? "null" : JsonString(r.progress.status().message())}});
  }
  const v1::ProgressResponse& p = *r.progress;
  return JsonObject({{"present", "true"},
                     {"current_epoch", absl::StrCat(p.current_epoch())},
                     {"num_epochs", absl::StrCat(p.num_epochs())},
                     {"done", JsonBool(p.done())},
                     {"consistency", JsonString(ConsistencyOf(p))},
                     {"sync_rounds_applied", absl::StrCat(p.sync_rounds_applied())},
                     {"sync_rounds_abandoned", absl::StrCat(p.sync_rounds_abandoned())},
                     {"epochs", EpochsJson(p)},
                     {"workers", WorkersJson(p)},
                     {"workers_expired", absl::StrCat(p.workers_expired())}});
}

std::string StatusJson(const StatusReport& r) {
  std::vector<std::string> shards, warnings;
  for (size_t i = 0; i < r.shards.size(); ++i) {
    shards.push_back(ShardJson(i, r.addresses[i], r.shards[i]));
  }
  for (const std::string& w : r.warnings) warnings.push_back(JsonString(w));
  return JsonObject({{"shards", JsonArray(shards)},
                     {"warnings", JsonArray(warnings)},
                     {"throughput", ThroughputJson(r.throughput)},
                     {"coordinator", CoordinatorJson(r)}}) +
         "\n";
}

// ---------------------------------------------------------------------------
// Commands. Each returns the process exit status.

int RuntimeError(const absl::Status& s) {
  std::fprintf(stderr, "spotps-ctl: %s\n", s.ToString().c_str());
  return kRuntimeError;
}

int StatusCommand(Cluster& cluster) {
  absl::StatusOr<StatusReport> report = GatherStatus(cluster);
  if (!report.ok()) {
    return RuntimeError(absl::Status(
        report.status().code(),
        absl::StrCat("cannot read the cluster's status: ", report.status().message())));
  }
  const std::string out = absl::GetFlag(FLAGS_json) ? StatusJson(*report) : StatusText(*report);
  std::fputs(out.c_str(), stdout);
  // The shards answered, but a coordinator that exists and fails is trouble.
  return HasCoordinator(*report) || NoCoordinator(*report) ? 0 : kRuntimeError;
}

int CheckpointCommand(Cluster& cluster) {
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> coordinator = ConnectCoordinator(cluster);
  if (!coordinator.ok()) return RuntimeError(coordinator.status());
  absl::StatusOr<v1::CheckpointNowResponse> r = (*coordinator)->CheckpointNow();
  if (absl::IsUnimplemented(r.status())) {
    std::fprintf(stderr,
                 "spotps-ctl: checkpoint: shard 0 (%s) does not implement "
                 "Coordinator.CheckpointNow: it hosts no coordinator (start it with --epochs) "
                 "or its spotps-ps predates checkpoints\n",
                 cluster.shard_address(0).c_str());
    return kRuntimeError;
  }
  if (!r.ok()) return RuntimeError(r.status());
  std::printf("checkpoint: id=%llu seconds=%.2f\n",
              static_cast<unsigned long long>(r->checkpoint_id()), r->seconds());
  return 0;
}

struct UnitTotals {
  uint64_t units = 0;
  uint64_t committed = 0;
};

UnitTotals Totals(const v1::ProgressResponse& p) {
  UnitTotals t;
  for (const v1::EpochProgress& e : p.epochs()) {
    t.units += e.units();
    t.committed += e.committed();
  }
  return t;
}

void PrintProgressLine(absl::string_view label, const v1::ProgressResponse& p,
                       absl::Duration elapsed) {
  const UnitTotals t = Totals(p);
  std::printf("%s: epoch=%d/%d committed=%llu/%llu (%.1f%%) workers=%d elapsed_s=%.0f\n",
              std::string(label).c_str(), std::min(p.current_epoch() + 1, p.num_epochs()),
              p.num_epochs(), static_cast<unsigned long long>(t.committed),
              static_cast<unsigned long long>(t.units),
              t.units > 0 ? 100.0 * static_cast<double>(t.committed) / t.units : 100.0,
              p.workers_size(), absl::ToDoubleSeconds(elapsed));
  std::fflush(stdout);
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
      PrintProgressLine("progress", *p, now - start_);
    } else {
      std::fprintf(stderr, "spotps-ctl: wait-done: %s (still waiting)\n",
                   p.status().ToString().c_str());
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
    std::fprintf(stderr,
                 "spotps-ctl: wait-done: shard 0 (%s) hosts no coordinator: nothing to wait for\n",
                 cluster.shard_address(0).c_str());
    return kRuntimeError;
  }
  if (!p.ok()) return RuntimeError(p.status());
  ProgressPrinter printer(start);
  while (!p.ok() || !p->done()) {
    if (absl::Now() >= give_up) {
      std::fprintf(stderr, "spotps-ctl: wait-done: not done after %.0f s\n",
                   absl::ToDoubleSeconds(absl::Now() - start));
      return kRuntimeError;
    }
    printer.Maybe(p);
    absl::SleepFor(std::min(absl::Seconds(1), give_up - absl::Now()));
    p = (*coordinator)->Progress();
  }
  PrintProgressLine("done", *p, absl::Now() - start);
  return 0;
}

struct Command {
  absl::string_view name;
  int (*run)(Cluster& cluster);
};

constexpr Command kCommands[] = {
    {"status", StatusCommand}, {"checkpoint", CheckpointCommand}, {"wait-done", WaitDoneCommand}};

const Command* FindCommand(absl::string_view name) {
  for (const Command& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "spotps-ctl: %s (see spotps-ctl --help)\n", std::string(message).c_str());
  return kUsageError;
}

int Run(int argc, char** argv) {
  if (WantsHelp(argc, argv)) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  absl::StatusOr<std::vector<std::string>> args = ParseArgs(argc, argv);
  if (!args.ok()) return UsageError(args.status().message());
  if (args->size() != 1) {
    return UsageError(args->empty()
                          ? "no command given"
                          : absl::StrCat("one command expected, got: ", absl::StrJoin(*args, " ")));
  }
  const Command* command = FindCommand((*args)[0]);
  if (command == nullptr) return UsageError(absl::StrCat("unknown command '", (*args)[0], "'"));
  if (absl::GetFlag(FLAGS_ps).empty()) return UsageError("--ps=host:port,... is required");
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = ConnectShards();
  if (!cluster.ok()) return UsageError(cluster.status().message());
  if ((*cluster)->num_shards() == 0) return UsageError("--ps names no shard");
  return command->run(**cluster);
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) { return spotps::Run(argc, argv); }
