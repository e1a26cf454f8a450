#!/usr/bin/env bash
# spotps in its default mode against PyTorch DDP, on one host, measured in
# one run: N spotps-trainer processes of one thread against one spotps-ps
# (default flags: "fresh", every update the average of the trainers' pushes)
# for --seconds, then the same GPT shape in N DistributedDataParallel
# processes of one thread over gloo (tests/bench/torch_baseline.py --ddp=N)
# for --ddp_steps steps each. Both sides: BF16 autocast, AdamW, clipping,
# batch x seq_len tokens a step per process.
#
#   tests/bench/ddp_comparison.sh BIN_DIR [--model=small] [--trainers=2] [--batch=16]
#                                 [--seq_len=256] [--seconds=60] [--ddp_steps=30]
#
# Last line: ddp: spotps_tokens_per_s=X ddp_tokens_per_s=Y ratio=R (R = X / Y).
set -euo pipefail
source "$(dirname "$0")/../support/test_corpus.sh"

bin=${1:?usage: ddp_comparison.sh BIN_DIR [flags]}
shift
model=small trainers=2 batch=16 seq_len=256 seconds=60 ddp_steps=30
for arg in "$@"; do
  case "$arg" in
    --model=*) model=${arg#*=} ;;
    --trainers=*) trainers=${arg#*=} ;;
    --batch=*) batch=${arg#*=} ;;
    --seq_len=*) seq_len=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --ddp_steps=*) ddp_steps=${arg#*=} ;;
    *) echo "ddp_comparison.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-ddp-XXXXXX")
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ $status -ne 0 ] && for f in "$work"/*.log; do echo "== $f"; tail -n 5 "$f"; done >&2
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT
make_test_corpus "$bin" "$work"

"$bin/spotps-ps" --listen=127.0.0.1:0 --port_file="$work/ps.port" --shard_index=0 --num_shards=1 \
  --optimizer=adamw --lr=3e-4 > "$work/ps.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/ps.port" ] && break; sleep 0.1; done
[ -s "$work/ps.port" ] || { echo "the shard did not start" >&2; exit 1; }
for i in $(seq 0 $((trainers - 1))); do
  "$bin/spotps-trainer" --ps="127.0.0.1:$(cat "$work/ps.port")" --model="$model" \
    --data="$work/corpus.tokens" --batch="$batch" --seq_len="$seq_len" --threads=1 \
    --worker_index="$i" --max_seconds="$seconds" --eval_batches=0 --log_every=0 \
    > "$work/trainer$i.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]:1}"; do wait "$pid"; done
spotps=$(sed -n 's/^summary: .* tokens_per_s=\([0-9.]*\) .*/\1/p' "$work"/trainer*.log |
         awk '{s += $1} END {printf "%.0f", s}')
grep -h '^summary: ' "$work"/trainer*.log | cut -c1-220

/usr/bin/python3 "$here/torch_baseline.py" --model="$model" --batch="$batch" --seq_len="$seq_len" \
  --threads=1 --ddp="$trainers" --steps="$ddp_steps" > "$work/ddp.log" 2>&1
cat "$work/ddp.log"
ddp=$(sed -n 's/^torch_tokens_per_s=\([0-9.]*\)$/\1/p' "$work/ddp.log")
awk -v x="$spotps" -v y="$ddp" \
  'BEGIN { printf "ddp: spotps_tokens_per_s=%.0f ddp_tokens_per_s=%.0f ratio=%.3f\n", x, y, x / y }'
