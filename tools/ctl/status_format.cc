#include "tools/ctl/status_format.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace spotps {
namespace {

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
  for (size_t i = 0; i < r.shards.size(); ++i) {
    const v1::StatsResponse& s = r.shards[i];
    if (s.last_checkpoint_error().empty()) continue;
    absl::StrAppend(&out, "checkpoint failed: shard ", i, " at ",
                    absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                                     absl::FromUnixMillis(s.last_checkpoint_error_unix_ms()),
                                     absl::UTCTimeZone()),
                    ": ", s.last_checkpoint_error(), "\n");
  }
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
                      p.current_epoch(), p.num_epochs(), p.done() ? "yes" : "no", ConsistencyOf(p)),
      EpochsTable(p), SyncRoundsText(p),
      absl::StrFormat("workers: live=%d expired=%d\n", p.workers_size(), p.workers_expired()),
      p.workers().empty() ? "" : WorkersTable(p));
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
      {"last_checkpoint_error", JsonString(s.last_checkpoint_error())},
      {"last_checkpoint_error_unix_ms", absl::StrCat(s.last_checkpoint_error_unix_ms())},
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

}  // namespace

std::string StatusText(const StatusReport& r) {
  return absl::StrCat(ShardsText(r), ThroughputText(r.throughput), CoordinatorText(r));
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

std::string ProgressLine(absl::string_view label, const v1::ProgressResponse& p,
                         absl::Duration elapsed) {
  const UnitTotals t = Totals(p);
  return absl::StrFormat("%s: epoch=%d/%d committed=%d/%d (%.1f%%) workers=%d elapsed_s=%.0f\n",
                         label, std::min(p.current_epoch() + 1, p.num_epochs()), p.num_epochs(),
                         t.committed, t.units,
                         t.units > 0 ? 100.0 * static_cast<double>(t.committed) / t.units : 100.0,
                         p.workers_size(), absl::ToDoubleSeconds(elapsed));
}

}  // namespace spotps
