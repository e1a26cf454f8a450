#include "ps/rpc/status_page.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace spotps {
namespace {

// A JSON number; null for NaN and infinities, which JSON cannot spell.
std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

int64_t UnixMs(absl::Time t) { return absl::ToUnixMillis(t); }

std::string ShardJson(const v1::StatsResponse& s, const std::string& address,
                      const std::string& error) {
  std::vector<std::string> versions;
  uint64_t elements = 0;
  for (const v1::PartitionStats& p : s.partitions()) {
    versions.push_back(
        absl::StrCat("[", p.partition_id(), ",", p.version(), ",", p.num_elements(), "]"));
    elements += p.num_elements();
  }
  return absl::StrCat(
      "{\"index\":", s.shard_index(), ",\"address\":", JsonString(address),
      ",\"error\":", JsonString(error), ",\"initialized\":", s.initialized() ? "true" : "false",
      ",\"global_step\":", s.global_step(), ",\"pushes_applied\":", s.pushes_applied(),
      ",\"pushes_refused\":", s.pushes_rejected() + s.pushes_too_stale(), ",\"pulls\":", s.pulls(),
      ",\"bytes_in\":", s.bytes_in(), ",\"bytes_out\":", s.bytes_out(),
      ",\"mean_staleness\":", Num(s.mean_staleness()), ",\"max_staleness\":", s.max_staleness(),
      ",\"learning_rate\":", Num(s.learning_rate()), ",\"parameters\":", elements,
      ",\"bytes\":", elements * 4, ",\"last_checkpoint_id\":", s.last_checkpoint_id(),
      ",\"checkpoint_error\":", JsonString(s.last_checkpoint_error()), ",\"partitions\":[",
      absl::StrJoin(versions, ","), "]}");
}

}  // namespace

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&') {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string StatusPage::Json() {
  return absl::StrCat("{\"now_ms\":", UnixMs(absl::Now()),
                      ",\"num_shards\":", store_->options().num_shards,
                      ",\"shards\":", ShardsJson(), ",\"coordinator\":", CoordinatorJson(),
                      ",\"history\":", HistoryJson(), "}");
}

std::string StatusPage::ShardsJson() {
  std::vector<std::string> shards;
  v1::StatsResponse own;
  store_->FillStats(&own);
  if (checkpointer_ != nullptr) {
    own.set_last_checkpoint_id(checkpointer_->last_written_id());
    own.set_last_checkpoint_error(checkpointer_->last_failure().message);
  }
  shards.push_back(ShardJson(own, "this shard", ""));
  for (size_t i = 0; peers_ != nullptr && i < peers_->size(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    v1::StatsResponse stats;
    grpc::Status s = peers_->stub(i).Stats(&context, v1::StatsRequest(), &stats);
    if (!s.ok()) stats.set_shard_index(static_cast<uint32_t>(i + 1));
    shards.push_back(ShardJson(stats, peers_->address(i), s.ok() ? "" : s.error_message()));
  }
  std::string checkpoint = "null";
  if (checkpointer_ != nullptr) {
    const ShardCheckpointer::Success last = checkpointer_->last_success();
    checkpoint = absl::StrCat(
        "{\"id\":", last.id, ",\"time_ms\":",
        last.time == absl::InfinitePast() ? std::string("null") : absl::StrCat(UnixMs(last.time)),
        ",\"seconds\":", Num(last.seconds), ",\"bytes\":", last.bytes,
        ",\"error\":", JsonString(checkpointer_->last_failure().message), "}");
  }
  return absl::StrCat("{\"list\":[", absl::StrJoin(shards, ","), "],\"checkpoint\":", checkpoint,
                      "}");
}

std::string StatusPage::CoordinatorJson() {
  if (coordinator_ == nullptr) return "null";
  const v1::ProgressResponse p = coordinator_->Progress();
  std::map<uint64_t, TrainingPoint> latest;
  if (history_ != nullptr) latest = history_->Latest();
  std::vector<std::string> epochs, workers;
  for (const v1::EpochProgress& e : p.epochs()) {
    epochs.push_back(absl::StrCat("{\"epoch\":", e.epoch(), ",\"units\":", e.units(),
                                  ",\"committed\":", e.committed(), ",\"leased\":", e.leased(),
                                  ",\"reissued\":", e.reissued(),
                                  ",\"duplicated\":", e.duplicated(), "}"));
  }
  auto report = [](const TrainingPoint* t) {
    if (t == nullptr) return std::string(",\"steps\":null");
    return absl::StrCat(",\"steps\":", t->steps, ",\"tokens\":", t->tokens,
                        ",\"train_loss\":", Num(t->train_loss),
                        ",\"tokens_per_s\":", Num(t->tokens_per_s),
                        ",\"val_loss\":", t->val_step > 0 ? Num(t->val_loss) : std::string("null"),
                        ",\"val_accuracy\":",
                        t->val_step > 0 && t->val_accuracy >= 0 ? Num(t->val_accuracy)
                                                                : std::string("null"),
                        ",\"report_ms\":", UnixMs(t->time));
  };
  const double lease_ms = absl::ToDoubleMilliseconds(coordinator_->worker_lease());
  for (const v1::WorkerStatus& w : p.workers()) {
    auto it = latest.find(w.worker_id());
    // Heartbeats come every lease/3: a worker silent past half its lease
    // is probably stalled or gone.
    const char* state = w.ms_since_heartbeat() > lease_ms / 2 ? "silent" : "live";
    workers.push_back(
        absl::StrCat("{\"id\":", w.worker_id(), ",\"name\":", JsonString(w.name()), ",\"state\":\"",
                     state, "\",\"units_committed\":", w.units_committed(),
                     ",\"ms_since_heartbeat\":", w.ms_since_heartbeat(), ",\"clock\":", w.clock(),
                     report(it == latest.end() ? nullptr : &it->second), "}"));
    if (it != latest.end()) latest.erase(it);
  }
  // Workers that reported once but are registered no longer: drained,
  // finished or dead (their lease expired).
  for (const auto& [id, t] : latest) {
    workers.push_back(absl::StrCat("{\"id\":", id, ",\"name\":", JsonString(t.worker),
                                   ",\"state\":\"gone\"", report(&t), "}"));
  }
  return absl::StrCat("{\"epoch\":", p.current_epoch(), ",\"num_epochs\":", p.num_epochs(),
                      ",\"done\":", p.done() ? "true" : "false",
                      ",\"consistency\":", JsonString(ConsistencyName(coordinator_->consistency())),
                      ",\"workers_expired\":", p.workers_expired(),
                      ",\"sync_rounds_applied\":", p.sync_rounds_applied(), ",\"epochs\":[",
                      absl::StrJoin(epochs, ","), "],\"workers\":[", absl::StrJoin(workers, ","),
                      "]}");
}

std::string StatusPage::HistoryJson() {
  if (history_ == nullptr) return "[]";
  // [time_ms, worker_id, steps, tokens, train_loss, tokens_per_s, val_loss|null]
  std::vector<std::string> rows;
  for (const TrainingPoint& t : history_->Points()) {
    rows.push_back(absl::StrCat("[", UnixMs(t.time), ",", t.worker_id, ",", t.steps, ",", t.tokens,
                                ",", Num(t.train_loss), ",", Num(t.tokens_per_s), ",",
                                t.has_val ? Num(t.val_loss) : std::string("null"), "]"));
  }
  return absl::StrCat("[", absl::StrJoin(rows, ","), "]");
}

const std::string& StatusPage::Html() {
  static const std::string* const kPage = new std::string(R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>spotps job status</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #eee}
.bar{background:#eee;height:12px;border-radius:3px;overflow:hidden}.bar>div{background:#7a8ca3;height:12px}
.live{color:#187a2f}.silent{color:#b26b00}.gone{color:#888}.err{color:#b00020}
.kpi{display:inline-block;margin-right:22px}.kpi b{font-size:18px;display:block}
svg text{font-size:11px;fill:#555} svg .legend{cursor:pointer} svg .legend.off{opacity:.35}
</style></head>
<body data-ready="0">
<h1>spotps job status</h1>
<div id="status-updated">loading...</div>
<div class="card" id="summary"></div>
<div class="grid">
<div class="card"><h2>Training and validation loss</h2><svg id="loss-chart" width="560" height="220"></svg></div>
<div class="card"><h2>Tokens/s (all trainers)</h2><svg id="tokens-chart" width="560" height="220"></svg></div>
</div>
<h2>Workers</h2><div class="card"><table id="workers"><thead><tr><th>worker</th><th>state</th>
<th>steps</th><th>units committed</th><th>train loss</th><th>val loss</th><th>val accuracy</th><th>tokens/s</th>
<th>last heartbeat</th></tr></thead><tbody></tbody></table></div>
<h2>Epochs</h2><div class="card" id="epochs"></div>
<h2>Shards</h2><div class="card"><table id="shards"><thead><tr><th>shard</th><th>global step</th>
<th>partitions (id:version)</th><th>parameters</th><th>size</th><th>pushes applied</th><th>refused</th>
<th>staleness mean/max</th><th>checkpoint</th></tr></thead><tbody></tbody></table></div>
<h2>Last checkpoint</h2><div class="card" id="checkpoint"></div>
<script>
"use strict";
const NS = "http://www.w3.org/2000/svg";
const COLORS = ["#3b7dd8","#d8453b","#2f9e44","#9c36b5","#e8590c","#1098ad","#5c940d","#862e9c"];
function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
// "—" for what a worker never measured (no validation with --eval_batches=0).
function fmt(v, d) { return v === null || v === undefined || !isFinite(v) ? "\u2014" : Number(v).toFixed(d); }
// Axis labels: "0", not "0.00"; three significant digits below 100.
function tick(y) { return Math.abs(y) >= 100 ? y.toFixed(0) : String(+y.toPrecision(3)); }
// Series hidden by a click on their legend entry, kept in the URL's hash
// (#hide=name|name) so that a view can be linked to.
const hidden = new Set(decodeURIComponent(location.hash.replace(/^#hide=/, "")).split("|").filter(x => x));
function toggle(name) {
  hidden.has(name) ? hidden.delete(name) : hidden.add(name);
  history.replaceState(null, "", location.pathname +
      (hidden.size ? "#hide=" + encodeURIComponent([...hidden].join("|")) : ""));
  if (lastData) render(lastData);
}
let lastData = null;
function bytes(n) {
  const u = ["B","KiB","MiB","GiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
function cell(row, text, cls) {
  const td = document.createElement("td"); td.textContent = text;
  if (cls) td.className = cls; row.appendChild(td); return td;
}
// series: [{name, color, points: [[x, y]...], dots}]; x is ms.
function plot(svg, series, ylabel) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = +svg.getAttribute("width"), H = +svg.getAttribute("height");
  const L = 50, R = 110, T = 10, B = 28;
  const all = [].concat(...series.map(s => s.points));
  if (all.length === 0) {
    svg.appendChild(el("text", {x: L, y: H / 2, id: svg.id + "-empty"}, "no reports yet"));
    return;
  }
  let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
  let y0 = Math.min(0, ...all.map(p => p[1])), y1 = Math.max(...all.map(p => p[1]));
  if (x1 === x0) x1 = x0 + 1000; if (y1 === y0) y1 = y0 + 1;
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  svg.appendChild(el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}));
  svg.appendChild(el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}));
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    svg.appendChild(el("text", {x: 4, y: sy(y) + 4, class: "tick"}, tick(y)));
  }
  svg.appendChild(el("text", {x: L, y: H - 8}, "-" + ((x1 - x0) / 1000).toFixed(0) + " s"));
  svg.appendChild(el("text", {x: W - R - 20, y: H - 8}, "now"));
  svg.appendChild(el("text", {x: W - R + 6, y: H - B}, ylabel));
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const off = hidden.has(s.name);
    // A style, not a fill attribute: the page's CSS would win over that.
    const legend = el("text", {x: W - R + 6, y: T + 12 + 14 * i, style: "fill:" + s.color,
                               class: "legend" + (off ? " off" : ""), "data-series": s.name},
                      s.name + " " + tick(s.points[s.points.length - 1][1]));
    legend.addEventListener("click", () => toggle(s.name));
    svg.appendChild(legend);
    if (off) return;
    // Earlier series are drawn wider, so that one that runs under a later
    // one still shows at its edges.
    const width = 1.4 + 2.2 * (series.length - 1 - i) / Math.max(1, series.length - 1);
    const pts = s.points.map(p => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ");
    svg.appendChild(el("polyline", {points: pts, fill: "none", stroke: s.color,
                                    "stroke-width": width.toFixed(1), "stroke-dasharray": s.dash || "",
                                    "data-series": s.name}));
    if (s.dots) s.points.forEach(p => svg.appendChild(el("circle",
        {cx: sx(p[0]), cy: sy(p[1]), r: 2.5, fill: s.color})));
  });
}
function render(d) {
  lastData = d;
  const c = d.coordinator, shards = d.shards.list;
  const names = {};
  if (c) c.workers.forEach(w => names[w.id] = w.name);
  // Loss curves: one train and one validation series per worker.
  const train = {}, val = {}, last = {}, tps = [];
  d.history.forEach(r => {
    const [t, id, , , loss, rate, v] = r;
    (train[id] = train[id] || []).push([t, loss]);
    if (v !== null) (val[id] = val[id] || []).push([t, v]);
    last[id] = {t: t, rate: rate};
    let sum = 0;
    for (const k in last) if (t - last[k].t < 15000) sum += last[k].rate;
    tps.push([t, sum]);
  });
  const series = [];
  Object.keys(train).forEach((id, i) => {
    const color = COLORS[i % COLORS.length], name = names[id] || ("worker " + id);
    series.push({name: name + " train", color: color, points: train[id]});
    if (val[id]) series.push({name: name + " val", color: color, points: val[id], dash: "5,3", dots: true});
  });
  plot(document.getElementById("loss-chart"), series, "loss");
  plot(document.getElementById("tokens-chart"), [{name: "tokens/s", color: "#2f9e44", points: tps}], "tokens/s");

  const summary = document.getElementById("summary");
  summary.textContent = "";
  const kpi = (label, value, id) => {
    const k = document.createElement("span"); k.className = "kpi"; if (id) k.id = id;
    const b = document.createElement("b"); b.textContent = value; k.appendChild(b);
    k.appendChild(document.createTextNode(label)); summary.appendChild(k);
  };
  const live = c ? c.workers.filter(w => w.state !== "gone").length : 0;
  kpi("workers", live, "kpi-workers");
  kpi("tokens/s", tps.length ? tps[tps.length - 1][1].toFixed(0) : "-", "kpi-tokens");
  if (c) kpi("epoch", (Math.min(c.epoch + 1, c.num_epochs)) + " / " + c.num_epochs + (c.done ? " (done)" : ""), "kpi-epoch");
  kpi("global step (shard 0)", shards[0].global_step, "kpi-step");
  const staleness = shards.filter(s => !s.error).map(s => s.mean_staleness);
  kpi("mean staleness", staleness.length ? Math.max(...staleness).toFixed(2) : "-", "kpi-staleness");
  if (c) kpi("consistency", c.consistency);

  const wbody = document.querySelector("#workers tbody");
  wbody.textContent = "";
  if (c) c.workers.forEach(w => {
    const row = document.createElement("tr"); row.className = "worker";
    cell(row, w.name); cell(row, w.state, w.state);
    cell(row, w.steps === null ? "\u2014" : w.steps);
    cell(row, w.units_committed === undefined ? "\u2014" : w.units_committed);
    cell(row, fmt(w.train_loss, 4)); cell(row, fmt(w.val_loss, 4));
    cell(row, fmt(w.val_accuracy, 4)); cell(row, fmt(w.tokens_per_s, 0));
    cell(row, w.ms_since_heartbeat === undefined ? "\u2014" : (w.ms_since_heartbeat / 1000).toFixed(1) + " s ago");
    wbody.appendChild(row);
  });

  const epochs = document.getElementById("epochs");
  epochs.textContent = "";
  if (!c) epochs.textContent = "shard 0 runs no coordinator (--epochs=0)";
  else c.epochs.forEach(e => {
    const div = document.createElement("div"); div.className = "epoch";
    const pct = e.units ? 100 * e.committed / e.units : 0;
    // Epochs count from 1 on the page, as in the summary's "epoch 1 / N".
    div.appendChild(document.createTextNode("epoch " + (e.epoch + 1) + " of " + c.num_epochs + ": " + e.committed + " / " + e.units +
        " units committed, " + e.leased + " leased, " + e.reissued + " re-issued, " + e.duplicated + " duplicated"));
    const bar = document.createElement("div"); bar.className = "bar";
    const fill = document.createElement("div"); fill.style.width = pct.toFixed(1) + "%";
    bar.appendChild(fill); div.appendChild(bar); epochs.appendChild(div);
  });

  const sbody = document.querySelector("#shards tbody");
  sbody.textContent = "";
  shards.forEach(s => {
    const row = document.createElement("tr"); row.className = "shard";
    cell(row, s.index + (s.error ? " (unreachable)" : ""), s.error ? "err" : "");
    cell(row, s.global_step);
    cell(row, s.partitions.map(p => p[0] + ":" + p[1]).join(" "));
    cell(row, s.parameters); cell(row, bytes(s.bytes)); cell(row, s.pushes_applied);
    cell(row, s.pushes_refused);
    cell(row, fmt(s.mean_staleness, 2) + " / " + s.max_staleness);
    cell(row, s.checkpoint_error ? "failing: " + s.checkpoint_error : (s.last_checkpoint_id || "-"),
         s.checkpoint_error ? "err" : "");
    sbody.appendChild(row);
  });
  if (d.num_shards > shards.length) {
    const row = document.createElement("tr");
    cell(row, "shards " + shards.length + ".." + (d.num_shards - 1) + ": not shown (shard 0 has no --peers)");
    sbody.appendChild(row);
  }
  const cp = d.shards.checkpoint, cpdiv = document.getElementById("checkpoint");
  if (!cp) cpdiv.textContent = "checkpoints are off (no --checkpoint_dir)";
  else if (cp.time_ms === null) cpdiv.textContent = "no checkpoint written yet" + (cp.error ? "; failing: " + cp.error : "");
  else cpdiv.textContent = "checkpoint " + cp.id + " written " + ((d.now_ms - cp.time_ms) / 1000).toFixed(0) +
      " s ago in " + cp.seconds.toFixed(2) + " s (" + bytes(cp.bytes) + " on shard 0)" + (cp.error ? "; now failing: " + cp.error : "");
  document.getElementById("status-updated").textContent =
      "updated " + new Date(d.now_ms).toLocaleTimeString() + " (every 2 s)";
  document.body.setAttribute("data-ready", "1");
}
function poll() {
  fetch("status.json", {cache: "no-store"}).then(r => r.json()).then(render).catch(e => {
    document.getElementById("status-updated").textContent = "cannot reach shard 0: " + e;
  }).finally(() => setTimeout(poll, 2000));
}
poll();
</script>
</body></html>
)HTML");
  return *kPage;
}

}  // namespace spotps
