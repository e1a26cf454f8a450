#include "tools/ctl/status_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/consistency.h"
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
  for (size_t i = 0; i < r.shards.size(); ++i) {
    const v1::StatsResponse& s = r.shards[i];
    if (s.average_target() == 0) continue;  // The shard does not average.
    absl::StrAppendFormat(
        &out, "averaging: shard %d target=%d live_pushers=%d wait_ms=%d waited_out=%d\n", i,
        s.average_target(), s.live_pushers(), s.average_wait_ms(), s.averaged_updates_waited_out());
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

std::string ConsistencyOf(const v1::ProgressResponse& p) {
  Consistency c;
  c.mode = p.consistency();
  c.ssp_bound = static_cast<int64_t>(p.ssp_bound());
  c.local_steps = p.local_steps();
  return ConsistencyName(c);
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
      absl::StrFormat("workers: live=%d expired=%d", p.workers_size(), p.workers_expired()),
      // Before the job starts (spotps-ps --min_workers): who it waits for.
      p.workers_to_start() > 0 ? absl::StrFormat(" to_start=%d\n", p.workers_to_start()) : "\n",
      p.workers().empty() ? "" : WorkersTable(p));
}

// ---------------------------------------------------------------------------
// JSON (nlohmann::json; keys in the order written here).

using JsonValue = nlohmann::ordered_json;

JsonValue Num(double v) { return std::isfinite(v) ? JsonValue(v) : JsonValue(nullptr); }

JsonValue ShardJson(size_t index, const std::string& address, const v1::StatsResponse& s) {
  const VersionRange versions = PartitionVersions(s);
  return {
      {"index", index},
      {"address", address},
      {"initialized", s.initialized()},
      {"shard_index", s.shard_index()},
      {"num_shards", s.num_shards()},
      {"global_step", s.global_step()},
      {"pushes_applied", s.pushes_applied()},
      {"pushes_duplicate", s.pushes_duplicate()},
      {"pushes_rejected", s.pushes_rejected()},
      {"pushes_too_stale", s.pushes_too_stale()},
      {"pulls", s.pulls()},
      {"mean_staleness", Num(s.mean_staleness())},
      {"max_staleness", s.max_staleness()},
      {"learning_rate", Num(s.learning_rate())},
      {"bytes_in", s.bytes_in()},
      {"bytes_out", s.bytes_out()},
      {"partitions", s.partitions_size()},
      {"partition_version_min", versions.min},
      {"partition_version_max", versions.max},
      // A string: JSON numbers lose the low bits of a 64-bit value.
      {"incarnation", absl::StrFormat("%016x", s.incarnation())},
      {"restored_checkpoint_id", s.restored_checkpoint_id()},
      {"last_checkpoint_id", s.last_checkpoint_id()},
      {"last_checkpoint_error", s.last_checkpoint_error()},
      {"last_checkpoint_error_unix_ms", s.last_checkpoint_error_unix_ms()},
      {"live_pushers", s.live_pushers()},
      {"average_target", s.average_target()},
      {"average_wait_ms", s.average_wait_ms()},
      {"averaged_updates_waited_out", s.averaged_updates_waited_out()},
  };
}

JsonValue ThroughputJson(const Throughput& t) {
  if (!t.sampled) return nullptr;
  return {{"seconds", Num(t.seconds)},
          {"pushes_per_s", Num(t.pushes_per_s)},
          {"tokens_per_s", t.tokens_per_s >= 0 ? Num(t.tokens_per_s) : JsonValue(nullptr)}};
}

JsonValue EpochsJson(const v1::ProgressResponse& p) {
  JsonValue epochs = JsonValue::array();
  for (const v1::EpochProgress& e : p.epochs()) {
    epochs.push_back({{"epoch", e.epoch()},
                      {"units", e.units()},
                      {"committed", e.committed()},
                      {"leased", e.leased()},
                      {"reissued", e.reissued()},
                      {"duplicated", e.duplicated()}});
  }
  return epochs;
}

JsonValue WorkersJson(const v1::ProgressResponse& p) {
  JsonValue workers = JsonValue::array();
  for (const v1::WorkerStatus& w : p.workers()) {
    workers.push_back({{"worker_id", w.worker_id()},
                       {"name", w.name()},
                       {"units_committed", w.units_committed()},
                       {"ms_since_heartbeat", w.ms_since_heartbeat()}});
  }
  return workers;
}

JsonValue CoordinatorJson(const StatusReport& r) {
  if (!HasCoordinator(r)) {
    return {{"present", false},
            {"error", NoCoordinator(r) ? JsonValue(nullptr)
                                       : JsonValue(std::string(r.progress.status().message()))}};
  }
  const v1::ProgressResponse& p = *r.progress;
  return {{"present", true},
          {"current_epoch", p.current_epoch()},
          {"num_epochs", p.num_epochs()},
          {"done", p.done()},
          {"consistency", ConsistencyOf(p)},
          {"sync_rounds_applied", p.sync_rounds_applied()},
          {"sync_rounds_abandoned", p.sync_rounds_abandoned()},
          {"epochs", EpochsJson(p)},
          {"workers_to_start", p.workers_to_start()},
          {"workers", WorkersJson(p)},
          {"workers_expired", p.workers_expired()}};
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
  JsonValue shards = JsonValue::array();
  for (size_t i = 0; i < r.shards.size(); ++i) {
    shards.push_back(ShardJson(i, r.addresses[i], r.shards[i]));
  }
  const JsonValue status = {{"shards", std::move(shards)},
                            {"warnings", r.warnings},
                            {"throughput", ThroughputJson(r.throughput)},
                            {"coordinator", CoordinatorJson(r)}};
  // Names and messages come from the network: bytes that are not UTF-8
  // become U+FFFD instead of failing the command.
  return status.dump(-1, ' ', /*ensure_ascii=*/false, JsonValue::error_handler_t::replace) + "\n";
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
