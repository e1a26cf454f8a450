#include "ps/rpc/status_page.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

namespace spotps {

// ps/rpc/status_page.html, embedded at build time (status_page_html.cc).
extern const char kStatusPageHtml[];

namespace {

// Insertion order kept, so that status.json reads in the order written here.
using JsonValue = nlohmann::ordered_json;

// A number, or null for NaN and infinities, which JSON cannot spell.
JsonValue Num(double v) { return std::isfinite(v) ? JsonValue(v) : JsonValue(nullptr); }

int64_t UnixMs(absl::Time t) { return absl::ToUnixMillis(t); }

// Averaged updates ("avg", "fresh", local rounds): the pushes an update
// waits for and how many were applied short of them; null elsewhere.
JsonValue AveragingJson(const v1::StatsResponse& s) {
  if (s.average_target() == 0) return nullptr;
  return {{"target", s.average_target()}, {"waited_out", s.averaged_updates_waited_out()}};
}

JsonValue ShardJson(const v1::StatsResponse& s, const std::string& address,
                    const std::string& error) {
  JsonValue partitions = JsonValue::array();
  uint64_t elements = 0;
  for (const v1::PartitionStats& p : s.partitions()) {
    partitions.push_back({p.partition_id(), p.version(), p.num_elements()});
    elements += p.num_elements();
  }
  return {{"index", s.shard_index()},
          {"address", address},
          {"error", error},
          {"initialized", s.initialized()},
          {"global_step", s.global_step()},
          {"pushes_applied", s.pushes_applied()},
          {"pushes_refused", s.pushes_rejected() + s.pushes_too_stale()},
          {"pulls", s.pulls()},
          {"bytes_in", s.bytes_in()},
          {"bytes_out", s.bytes_out()},
          {"mean_staleness", Num(s.mean_staleness())},
          {"max_staleness", s.max_staleness()},
          {"learning_rate", Num(s.learning_rate())},
          {"parameters", elements},
          {"bytes", elements * 4},
          {"last_checkpoint_id", s.last_checkpoint_id()},
          {"checkpoint_error", s.last_checkpoint_error()},
          {"averaging", AveragingJson(s)},
          {"partitions", std::move(partitions)}};
}

// A worker's newest report, as fields of its row.
void AddReport(const TrainingPoint* t, JsonValue* row) {
  JsonValue& r = *row;
  if (t == nullptr) {
    r["steps"] = nullptr;
    return;
  }
  r["steps"] = t->steps;
  r["tokens"] = t->tokens;
  r["train_loss"] = Num(t->train_loss);
  r["tokens_per_s"] = Num(t->tokens_per_s);
  r["val_loss"] = t->val_step > 0 ? Num(t->val_loss) : JsonValue(nullptr);
  r["val_accuracy"] =
      t->val_step > 0 && t->val_accuracy >= 0 ? Num(t->val_accuracy) : JsonValue(nullptr);
  r["report_ms"] = UnixMs(t->time);
}

JsonValue ShardsJson(const ShardStore* store, const ShardCheckpointer* checkpointer,
                     PeerShards* peers) {
  JsonValue shards = JsonValue::array();
  v1::StatsResponse own;
  store->FillStats(&own);
  if (checkpointer != nullptr) {
    own.set_last_checkpoint_id(checkpointer->last_written_id());
    own.set_last_checkpoint_error(checkpointer->last_failure().message);
  }
  shards.push_back(ShardJson(own, "this shard", ""));
  for (size_t i = 0; peers != nullptr && i < peers->size(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    v1::StatsResponse stats;
    grpc::Status s = peers->stub(i).Stats(&context, v1::StatsRequest(), &stats);
    if (!s.ok()) stats.set_shard_index(static_cast<uint32_t>(i + 1));
    shards.push_back(ShardJson(stats, peers->address(i), s.ok() ? "" : s.error_message()));
  }
  JsonValue checkpoint = nullptr;
  if (checkpointer != nullptr) {
    const ShardCheckpointer::Success last = checkpointer->last_success();
    checkpoint = {{"id", last.id},
                  {"time_ms", last.time == absl::InfinitePast() ? JsonValue(nullptr)
                                                                : JsonValue(UnixMs(last.time))},
                  {"seconds", Num(last.seconds)},
                  {"bytes", last.bytes},
                  {"error", checkpointer->last_failure().message}};
  }
  return {{"list", std::move(shards)}, {"checkpoint", std::move(checkpoint)}};
}

JsonValue CoordinatorJson(Coordinator* coordinator, const TrainingHistory* history) {
  if (coordinator == nullptr) return nullptr;
  const v1::ProgressResponse p = coordinator->Progress();
  std::map<uint64_t, TrainingPoint> latest;
  if (history != nullptr) latest = history->Latest();
  JsonValue epochs = JsonValue::array(), workers = JsonValue::array();
  for (const v1::EpochProgress& e : p.epochs()) {
    epochs.push_back({{"epoch", e.epoch()},
                      {"units", e.units()},
                      {"committed", e.committed()},
                      {"leased", e.leased()},
                      {"reissued", e.reissued()},
                      {"duplicated", e.duplicated()}});
  }
  const double lease_ms = absl::ToDoubleMilliseconds(coordinator->worker_lease());
  for (const v1::WorkerStatus& w : p.workers()) {
    auto it = latest.find(w.worker_id());
    // Heartbeats come every lease/3: a worker silent past half its lease
    // is probably stalled or gone.
    JsonValue row = {{"id", w.worker_id()},
                     {"name", w.name()},
                     {"state", w.ms_since_heartbeat() > lease_ms / 2 ? "silent" : "live"},
                     {"units_committed", w.units_committed()},
                     {"ms_since_heartbeat", w.ms_since_heartbeat()},
                     {"clock", w.clock()}};
    AddReport(it == latest.end() ? nullptr : &it->second, &row);
    workers.push_back(std::move(row));
    if (it != latest.end()) latest.erase(it);
  }
  // Workers that reported once but are registered no longer: drained,
  // finished or dead (their lease expired).
  for (const auto& [id, t] : latest) {
    JsonValue row = {{"id", id}, {"name", t.worker}, {"state", "gone"}};
    AddReport(&t, &row);
    workers.push_back(std::move(row));
  }
  return {{"epoch", p.current_epoch()},
          {"num_epochs", p.num_epochs()},
          {"done", p.done()},
          {"consistency", ConsistencyName(coordinator->consistency())},
          {"workers_expired", p.workers_expired()},
          {"sync_rounds_applied", p.sync_rounds_applied()},
          {"epochs", std::move(epochs)},
          {"workers", std::move(workers)}};
}

JsonValue HistoryJson(const TrainingHistory* history) {
  JsonValue rows = JsonValue::array();
  if (history == nullptr) return rows;
  // [time_ms, worker_id, steps, tokens, train_loss, tokens_per_s, val_loss|null]
  for (const TrainingPoint& t : history->Points()) {
    rows.push_back({UnixMs(t.time), t.worker_id, t.steps, t.tokens, Num(t.train_loss),
                    Num(t.tokens_per_s), t.has_val ? Num(t.val_loss) : JsonValue(nullptr)});
  }
  return rows;
}

}  // namespace

std::string StatusPage::Json() {
  ::spotps::JsonValue page = {{"now_ms", UnixMs(absl::Now())},
                              {"num_shards", store_->options().num_shards},
                              {"shards", ShardsJson(store_, checkpointer_, peers_)},
                              {"coordinator", CoordinatorJson(coordinator_, history_)},
                              {"history", HistoryJson(history_)}};
  // Names come from the network: bytes that are not UTF-8 become U+FFFD
  // instead of failing the page; everything beyond ASCII is escaped.
  return page.dump(-1, ' ', /*ensure_ascii=*/true, JsonValue::error_handler_t::replace);
}

const std::string& StatusPage::Html() {
  static const std::string* const kPage = new std::string(kStatusPageHtml);
  return *kPage;
}

}  // namespace spotps
