#!/usr/bin/env bash
# ops.Observability: a local job (2 shards, 2 trainers) with --metrics_listen
# everywhere, scraped by a real Prometheus server and shown to a real
# browser.
#
#   tests/ops/observability_test.sh BIN_DIR ARTIFACT_DIR
#
# Prometheus (Debian `prometheus`) scrapes both shards and both trainers
# every second; the test asks its HTTP API for the trainers' token rate
# (must be > 0), sees the shards' applied pushes grow and every target up.
# Headless Chromium (Debian `chromium`) loads shard 0's status page: the DOM
# after its script ran must show the workers, epochs, loss curves (train and
# validation), throughput, shards and the last checkpoint; a screenshot goes
# to ARTIFACT_DIR/status_page.png. Then the trainers are drained (SIGTERM)
# and everything is stopped. A missing prometheus or chromium fails the
# test: deploy/install-deps.sh installs both.
set -euo pipefail
source "$(dirname "$0")/../support/test_corpus.sh"
source "$(dirname "$0")/../support/prometheus.sh"

bin=${1:?usage: observability_test.sh BIN_DIR ARTIFACT_DIR}
artifacts=${2:?usage: observability_test.sh BIN_DIR ARTIFACT_DIR}
py=/usr/bin/python3
say() { echo "[ops-test $(date +%T)] $*"; }
fail() { echo "[ops-test] FAIL: $*" >&2; exit 1; }

for b in prometheus chromium "$py"; do
  command -v "$b" > /dev/null || fail "$b is missing: run deploy/install-deps.sh"
done
for b in spotps-ps spotps-trainer spotps-tokenize; do
  [ -x "$bin/$b" ] || fail "$bin/$b is not built"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-ops-test-XXXXXX")
pids=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [ $status -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 15 "$f"; }; done >&2
  fi
  if [ -n "${SPOTPS_KEEP_TEST_DIRS:-}" ]; then echo "[ops-test] kept $work" >&2; else rm -rf "$work"; fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# GET a URL; prints the body.
get() { "$py" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"; }
# Waits up to $2 seconds for a line matching regex $3 in log $1; prints the
# first capture group.
wait_log() {
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    if [ -f "$1" ]; then
      local v
      v=$(sed -n -E "s|^.*$3.*\$|\\1|p" "$1" | head -n 1)
      [ -n "$v" ] && { echo "$v"; return 0; }
    fi
    sleep 0.3
  done
  fail "no line matching '$3' in $1 within $2 s"
}

make_test_corpus "$bin" "$work" || fail "spotps-tokenize failed"

say "starting 2 shards and 2 trainers with --metrics_listen"
common=(--listen=127.0.0.1:0 --num_shards=2 --optimizer=adamw --lr=3e-3
        --metrics_listen=127.0.0.1:0)
"$bin/spotps-ps" "${common[@]}" --shard_index=1 --port_file="$work/shard1.port" \
  --checkpoint_dir="$work/ckpt1" > "$work/shard1.log" 2>&1 &
pids+=($!)
m1=$(wait_log "$work/shard1.log" 60 'metrics on http://[^:]*:([0-9]+)/metrics')
p1=$(wait_log "$work/shard1.port" 60 '^([0-9]+)$')
# Far more units than the test trains: the trainers are drained at the end.
"$bin/spotps-ps" "${common[@]}" --shard_index=0 --port_file="$work/shard0.port" \
  --checkpoint_dir="$work/ckpt0" --checkpoint_every_s=3 --peers="127.0.0.1:$p1" \
  --epochs=2 --units_per_epoch=50000 > "$work/shard0.log" 2>&1 &
pids+=($!)
m0=$(wait_log "$work/shard0.log" 60 'metrics on http://[^:]*:([0-9]+)/metrics, status page')
p0=$(wait_log "$work/shard0.port" 60 '^([0-9]+)$')
trainer_ports=()
trainer_pids=()
# Trainer 1 runs without validation, as deploy/local/scale.sh's do: the page
# shows a dash for what it never measured.
eval_flags=("--eval_every=15 --eval_batches=2" "--eval_batches=0")
for i in 0 1; do
  # Trainer 1 starts once trainer 0 has trained a while: two trainers on the
  # same weights draw nearly the same curves, and the one drawn last would
  # hide the other in the screenshot; trainer 0's early stretch stays its own.
  [ "$i" -eq 1 ] && wait_log "$work/trainer0.log" 120 'step (40) loss' > /dev/null
  # shellcheck disable=SC2086
  "$bin/spotps-trainer" --ps="127.0.0.1:$p0,127.0.0.1:$p1" --model=tiny --data="$work/corpus.tokens" \
    --batch=8 --seq_len=64 --threads=1 --worker_index=$i --log_every=20 ${eval_flags[i]} \
    --metrics_listen=127.0.0.1:0 > "$work/trainer$i.log" 2>&1 &
  pids+=($!)
  trainer_pids[i]=$!
done
for i in 0 1; do
  trainer_ports+=("$(wait_log "$work/trainer$i.log" 120 'metrics on port ([0-9]+)')")
done
say "metrics: shards on $m0 $m1, trainers on ${trainer_ports[*]}"

cat > "$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: spotps-ps
    static_configs:
      - targets: ['127.0.0.1:$m0', '127.0.0.1:$m1']
  - job_name: spotps-trainer
    static_configs:
      - targets: ['127.0.0.1:${trainer_ports[0]}', '127.0.0.1:${trainer_ports[1]}']
EOF
start_prometheus "$work/prometheus.yml" "$work"
say "prometheus ready at $prom"

up=$(wait_query 'sum(up)' 'v == 4')
token_rate=$(wait_query 'sum(rate(spotps_trainer_tokens_total[10s]))' 'v > 0')
applied_before=$(wait_query 'sum(spotps_shard_pushes_applied_total)' 'v > 0')
applied_after=$(wait_query 'sum(spotps_shard_pushes_applied_total)' "v > $applied_before")
say "prometheus: up=$up token_rate=$token_rate tokens/s pushes applied $applied_before -> $applied_after"
# Every family docs/operations.md lists is exported by someone.
for name in spotps_shard_pull_seconds_count spotps_shard_push_seconds_count \
    spotps_shard_apply_seconds_count spotps_shard_push_staleness_count \
    spotps_shard_received_bytes_total spotps_shard_sent_bytes_total spotps_shard_partitions \
    spotps_shard_global_step spotps_shard_partition_version spotps_shard_parameter_bytes \
    spotps_shard_averaged_updates_waited_out_total \
    spotps_coordinator_workers_live spotps_coordinator_units_committed_total \
    spotps_coordinator_units_leased spotps_coordinator_units_reissued_total \
    spotps_coordinator_training_reports_total spotps_trainer_steps_total \
    spotps_trainer_train_loss spotps_trainer_step_phase_seconds_count \
    spotps_trainer_drain_events_total; do
  wait_query "count($name)" 'v > 0' > /dev/null
done
wait_query 'max(spotps_shard_checkpoint_last_success_timestamp_seconds)' 'v > 1.7e9' > /dev/null
wait_query 'spotps_coordinator_workers_live' 'v == 2' > /dev/null

say "waiting for the status page to have losses, a validation loss and a checkpoint"
deadline=$((SECONDS + 120))
until get "http://127.0.0.1:$m0/status.json" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
h = d["history"]
ok = (len(h) >= 3 and any(r[6] is not None for r in h)
      and len(d["coordinator"]["workers"]) == 2
      and d["shards"]["checkpoint"]["time_ms"] is not None
      and all(not s["error"] for s in d["shards"]["list"]) and len(d["shards"]["list"]) == 2
      and all((s["averaging"] or {}).get("target", 0) >= 1 for s in d["shards"]["list"]))
sys.exit(0 if ok else 1)'; do
  [ $SECONDS -lt $deadline ] || fail "status.json never showed losses, val loss, 2 workers, 2 shards averaging and a checkpoint"
  sleep 1
done

url="http://127.0.0.1:$m0/"
chrome=(chromium --headless --disable-gpu --no-sandbox --disable-dev-shm-usage
        --user-data-dir="$work/chromium" --virtual-time-budget=8000)
timeout 120 "${chrome[@]}" --dump-dom "$url" > "$work/dom.html" 2> "$work/chromium.log" ||
  fail "chromium --dump-dom failed"
# The view with trainer-1's training curve hidden (a click on its legend
# entry; the page keeps it in the URL's hash).
timeout 120 "${chrome[@]}" --dump-dom "$url#hide=trainer-1%20train" > "$work/dom-hidden.html" \
  2>> "$work/chromium.log" || fail "chromium --dump-dom (hidden series) failed"
"$py" - "$work/dom.html" "$work/dom-hidden.html" <<'EOF'
import re, sys
dom = open(sys.argv[1]).read()
hidden = open(sys.argv[2]).read()
def need(pattern, what, text=None):
    if not re.search(pattern, dom if text is None else text, re.S):
        sys.exit("status page DOM lacks " + what)
def never(pattern, what, text=None):
    m = re.search(pattern, dom if text is None else text, re.S)
    if m:
        sys.exit("status page DOM shows " + what + ": " + m.group(0)[:120])
# Axis labels: plain numbers, the tokens/s axis starting at "0" (not "0.00").
need(r'id="tokens-chart".*?<text[^>]*class="tick"[^>]*>0</text>', 'a "0" label on the tokens/s axis')
never(r'class="tick"[^>]*>-?\d+\.\d*0</text>', "an axis label with trailing zeros")
# Each series in the legend, with its last value, so overlapping lines can
# be told apart; the first is drawn wider, so it shows under the second.
for name in ("trainer-0 train", "trainer-1 train", "trainer-0 val"):
    need(r'<text[^>]*class="legend"[^>]*data-series="%s">%s [0-9.]+</text>' % (name, name),
         "a legend entry for " + name)
widths = {series: float(w) for w, series in re.findall(
    r'<polyline[^>]*stroke-width="([0-9.]+)"[^>]*data-series="(trainer-\d train)"', dom)}
if len(widths) != 2 or len(set(widths.values())) != 2:
    sys.exit("the two training curves are not drawn at different widths: %s" % widths)
# Each shard's averaged updates ("fresh" by default): their k, and how
# many were applied short of it.
need(r'<tr class="shard">(?:(?!</tr>).)*<td>\d+ pushes each, \d+ waited out</td>', "a shard's averaged updates")
# Epochs count from 1 in the summary and in the progress rows alike.
need(r'id="kpi-epoch"><b>1 / 2</b>', 'the summary\'s "epoch 1 / 2"')
need(r'<div class="epoch">epoch 1 of 2: \d+ / 50000 units committed', "epoch 1's progress")
never(r'<div class="epoch">epoch 0', 'an epoch row counting from 0')
# Trainer 1 never validates: a dash, not "nan".
need(r'<tr class="worker"><td>trainer-1</td>(<td[^>]*>[^<]*</td>){4}<td>\u2014</td>',
     "a dash for trainer-1's validation loss")
never(r'>nan<|>NaN<', "a NaN")
# The hidden series: its legend entry greyed, its curve gone, the others drawn.
need(r'class="legend off" data-series="trainer-1 train"', "a greyed legend entry", hidden)
never(r'<polyline[^>]*data-series="trainer-1 train"', "trainer-1's hidden curve", hidden)
need(r'<polyline[^>]*data-series="trainer-0 train"', "trainer-0's curve with 1's hidden", hidden)
need(r'<body[^>]*data-ready="1"', "data-ready=1 (its script never rendered status.json)")
need(r'id="loss-chart".*?<polyline[^>]*data-series="trainer-\d+ train"', "a training-loss curve")
need(r'id="loss-chart".*?<polyline[^>]*data-series="trainer-\d+ val"', "a validation-loss curve")
need(r'id="tokens-chart".*?<polyline', "a tokens/s curve")
for i in (0, 1):
    # Silent: a heartbeat late on a loaded machine; still a registered worker.
    need(r'<tr class="worker"><td>trainer-%d</td><td class="(live|silent)">' % i, "worker trainer-%d" % i)
need(r'<tr class="shard"><td>0</td>.*<tr class="shard"><td>1</td>', "both shards")
need(r'id="checkpoint">checkpoint \d+ written', "the last checkpoint")
need(r'id="kpi-tokens"><b>[1-9]', "a tokens/s figure above 0")
need(r'id="kpi-staleness"><b>\d', "the staleness figure")
EOF
mkdir -p "$artifacts"
screenshot=$artifacts/status_page.png
rm -f "$screenshot"
timeout 120 "${chrome[@]}" --hide-scrollbars --window-size=1400,1500 --screenshot="$screenshot" "$url" \
  >> "$work/chromium.log" 2>&1 || fail "chromium --screenshot failed"
size=$(stat -c %s "$screenshot" 2>/dev/null || echo 0)
[ "$size" -gt 20000 ] || fail "screenshot $screenshot has only $size bytes"
head -c 8 "$screenshot" | od -An -tx1 | grep -q '89 50 4e 47' || fail "$screenshot is not a PNG"
# Both trainers' curves are visible in the picture: pixels of each one's
# colour (the page uses them for the curves alone).
"$py" "$(dirname "$0")/png_colors.py" "$screenshot" 3b7dd8 d8453b ||
  fail "the screenshot does not show both trainers' curves"

# Figures: size of a scrape and of the status page's data, and their time.
figures=$("$py" - "$m0" "${trainer_ports[0]}" <<'EOF'
import sys, time, urllib.request
def fetch(port, path):
    start = time.monotonic()
    body = urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=10).read()
    return body, (time.monotonic() - start) * 1000
shard, shard_ms = fetch(sys.argv[1], "/metrics")
trainer, trainer_ms = fetch(sys.argv[2], "/metrics")
status, status_ms = fetch(sys.argv[1], "/status.json")
series = lambda b: sum(1 for l in b.decode().splitlines() if l and not l.startswith("#"))
print("shard0_metrics=%dB/%dseries/%.1fms trainer_metrics=%dB/%dseries/%.1fms status_json=%dB/%.1fms"
      % (len(shard), series(shard), shard_ms, len(trainer), series(trainer), trainer_ms,
         len(status), status_ms))
EOF
)

say "draining the trainers"
for i in 0 1; do kill -TERM "${trainer_pids[i]}"; done
for i in 0 1; do
  status=0
  wait "${trainer_pids[i]}" || status=$?
  [ $status -eq 0 ] || fail "trainer $i exited $status after SIGTERM"
  grep -q '^summary: ' "$work/trainer$i.log" || fail "trainer $i printed no summary"
done
echo "observability: token_rate=$token_rate pushes_applied=$applied_before->$applied_after $figures screenshot=$screenshot"
