#!/usr/bin/env bash
# The main job: a local spotps cluster training the default model on the
# default corpus (the King James Bible from Debian's bible-kjv package).
#
#   deploy/local/up.sh [--seconds=180] [--workers=2] [--shards=2] [--model=tiny]
#                      [--batch=8] [--seq_len=128] [--lr=1e-3] [--dtype=bf16] [--epochs=1]
#                      [--consistency=async|ssp:S|sync] [--resume=RUN_DIR]
#
# Installs the dependencies, builds, prepares the corpus, starts the shards
# and trainers on loopback, shows their progress, checkpoints the final
# weights, prints the validation loss, samples text from them (pulled
# through the client library) and stops every process it started, on Ctrl-C
# too. Its last line is
#   final: val_loss=X tokens=N tokens_per_s=T
# --resume=RUN_DIR starts the shards of an earlier run from its checkpoints
# (with that run's settings) and trains on for --seconds; --seconds=0 only
# evaluates and samples.
set -euo pipefail

SECONDS_TO_TRAIN=180
WORKERS=2
SHARDS=2
MODEL=tiny
BATCH=8
SEQ_LEN=128
LR=1e-3
DTYPE=bf16
EPOCHS=1
CONSISTENCY=async
RESUME=""
for arg in "$@"; do
  case "$arg" in
    --seconds=*) SECONDS_TO_TRAIN=${arg#*=} ;;
    --minutes=*) SECONDS_TO_TRAIN=$(( ${arg#*=} * 60 )) ;;
    --workers=*) WORKERS=${arg#*=} ;;
    --shards=*) SHARDS=${arg#*=} ;;
    --model=*) MODEL=${arg#*=} ;;
    --batch=*) BATCH=${arg#*=} ;;
    --seq_len=*) SEQ_LEN=${arg#*=} ;;
    --lr=*) LR=${arg#*=} ;;
    --dtype=*) DTYPE=${arg#*=} ;;
    --epochs=*) EPOCHS=${arg#*=} ;;
    --consistency=*) CONSISTENCY=${arg#*=} ;;
    --resume=*) RESUME=${arg#*=} ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "up.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "$RESUME" ]; then
  # The earlier run's settings; --seconds and --workers still apply.
  [ -f "$RESUME/job.env" ] ||
    { echo "up.sh: $RESUME/job.env is missing: not a run directory of up.sh" >&2; exit 2; }
  # shellcheck source=/dev/null
  source "$RESUME/job.env"
fi

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=deploy/shell-lib.sh
source "$repo/deploy/shell-lib.sh"
cd "$repo"
say() { echo "[up] $*"; }

install_and_build spotps-ps spotps-trainer spotps-tokenize spotps-generate spotps-ctl
bin=$repo/build/bin

say "preparing the corpus"
corpus_dir=$repo/.cache/corpus
trainer/data/prepare_corpus.sh "$corpus_dir" "$bin/spotps-tokenize"
data=$corpus_dir/kjv.tokens

if [ -n "$RESUME" ]; then
  run_dir=$(cd "$RESUME" && pwd)
else
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/spotps-run-XXXXXX")
  printf '%s=%q\n' SHARDS "$SHARDS" MODEL "$MODEL" BATCH "$BATCH" SEQ_LEN "$SEQ_LEN" LR "$LR" \
    DTYPE "$DTYPE" EPOCHS "$EPOCHS" CONSISTENCY "$CONSISTENCY" > "$run_dir/job.env"
fi
# While the job runs, deploy/local/scale.sh finds it through this file.
job_env=$repo/.cache/local-job.env
shard_pids=()
trainer_pids=()
cleanup() {
  trap - INT TERM EXIT
  # Trainers that scale.sh added stop with the rest.
  mapfile -t scaled < <("$repo/deploy/local/scale.sh" pids "$run_dir" 2>/dev/null || true)
  # Another job may have taken the file over since; then it is not ours.
  grep -qx "SPOTPS_JOB_PID=$$" "$job_env" 2>/dev/null && rm -f "$job_env"
  # Trainers first, so that they drain (push, commit) while the shards still serve.
  stop_processes 10 "${trainer_pids[@]}" "${scaled[@]}"
  stop_processes 10 "${shard_pids[@]}"
  wait 2>/dev/null || true
  trainer_pids=()
  shard_pids=()
}
trap 'echo; say "interrupted: stopping everything"; cleanup; exit 130' INT TERM
trap cleanup EXIT

cores=$(nproc)
trainer_threads=$(( cores / WORKERS )); [ $trainer_threads -ge 1 ] || trainer_threads=1

# One work unit is one trainer step; an epoch is about one pass over the
# training tokens (the token file holds 2 bytes per token).
units=$(( $(stat -c %s "$data") / 2 * 95 / 100 / (BATCH * SEQ_LEN) ))
if [ -n "$RESUME" ]; then
  say "starting $SHARDS shards from the checkpoints in $run_dir/checkpoints"
else
  say "starting $SHARDS shards (logs in $run_dir); shard 0 coordinates $EPOCHS epoch(s) of $units units"
fi
# The job's first unit waits for all of its trainers (--min_workers), so
# that its first "fresh" update holds every trainer's first gradient.
start_gate=$WORKERS; [ "$SECONDS_TO_TRAIN" -gt 0 ] || start_gate=0
# Shards 1..N-1 first: shard 0 needs their addresses to drive checkpoints.
start_local_shards "$bin" "$run_dir" "$SHARDS" --optimizer=adamw --lr="$LR" --warmup_steps=50 \
    --weight_decay=0.01 --beta2=0.99 --consistency="$CONSISTENCY" \
    --checkpoint_dir="$run_dir/checkpoints/shard{i}" --metrics_listen=127.0.0.1:0 \
    -- --epochs="$EPOCHS" --units_per_epoch="$units" --checkpoint_every_s=30 \
    --min_workers="$start_gate" || exit 1
addresses=$shard_addresses
say "shards at $addresses"
# Shard 0 serves the status page on its metrics port (every process serves
# Prometheus metrics at /metrics on a port of its own; see its log).
status_port=""
for _ in $(seq 100); do
  status_port=$(sed -n -E 's|.*metrics on http://[^:]*:([0-9]+)/metrics, status page.*|\1|p' \
                "$run_dir/shard0.log" | tail -n 1)
  [ -n "$status_port" ] && break
  sleep 0.1
done
[ -n "$status_port" ] && say "status page: http://127.0.0.1:$status_port/ (metrics at /metrics)"

[ "$SECONDS_TO_TRAIN" -gt 0 ] || WORKERS=0
[ "$WORKERS" -eq 0 ] ||
  say "starting $WORKERS trainers: model=$MODEL dtype=$DTYPE batch=$BATCH seq_len=$SEQ_LEN for ${SECONDS_TO_TRAIN}s"
# A resumed run's trainers take indices (and logs) of their own.
first_index=0
while [ -e "$run_dir/trainer$first_index.log" ]; do first_index=$((first_index + 1)); done
for i in $(seq "$first_index" $((first_index + WORKERS - 1))); do
  "$bin/spotps-trainer" --ps="$addresses" --model="$MODEL" --data="$data" --dtype="$DTYPE" \
      --batch="$BATCH" --seq_len="$SEQ_LEN" --max_seconds="$SECONDS_TO_TRAIN" \
      --threads=$trainer_threads --worker_index=$i --log_every=20 --eval_every=100 \
      --eval_batches=4 --metrics_listen=127.0.0.1:0 \
      > >(tee "$run_dir/trainer$i.log") 2>&1 &
  trainer_pids+=($!)
done
{
  echo "# The local job deploy/local/up.sh runs; read by deploy/local/scale.sh."
  printf 'SPOTPS_%s=%q\n' JOB_PID $$ RUN_DIR "$run_dir" BIN "$bin" PS "$addresses" \
    MODEL "$MODEL" DATA "$data" BATCH "$BATCH" SEQ_LEN "$SEQ_LEN" DTYPE "$DTYPE" \
    THREADS "$trainer_threads" END_TIME $(( $(date +%s) + SECONDS_TO_TRAIN ))
} > "$job_env.tmp" && mv "$job_env.tmp" "$job_env"
status=0
for pid in "${trainer_pids[@]}"; do wait "$pid" || status=$?; done
[ $status -eq 0 ] || { say "a trainer failed (exit $status); logs in $run_dir"; exit 1; }
# Trainers that scale.sh added stop at the same deadline, and their tokens count.
for _ in $(seq 60); do
  [ -z "$("$repo/deploy/local/scale.sh" pids "$run_dir")" ] && break
  sleep 1
done

# The last rounds' weights go to disk before the shards stop: they are all
# that is left of the job afterwards.
"$bin/spotps-ctl" --ps="$addresses" checkpoint > "$run_dir/final-checkpoint.log" 2>&1 ||
  say "the final checkpoint failed (see $run_dir/final-checkpoint.log); the last periodic one stays"

say "evaluating and sampling from the final weights"
"$bin/spotps-generate" --ps="$addresses" --model="$MODEL" --data="$data" \
    --seq_len="$SEQ_LEN" --threads="$cores" | tee "$run_dir/generate.log"

# This run's trainers only (a resumed run's directory holds earlier logs).
logs=()
for ((i = first_index; ; i++)); do [ -e "$run_dir/trainer$i.log" ] || break; logs+=("$run_dir/trainer$i.log"); done
tokens=$(cat /dev/null "${logs[@]}" | sed -n 's/^summary: .* tokens=\([0-9]*\) .*/\1/p' |
         awk '{s += $1} END {print s + 0}')
seconds=$(cat /dev/null "${logs[@]}" | sed -n 's/^summary: .* seconds=\([0-9.]*\) .*/\1/p' |
          awk '$1 > m {m = $1} END {print m + 0}')
val_loss=$(sed -n 's/^eval: val_loss=\([0-9.]*\).*/\1/p' "$run_dir/generate.log")
tokens_per_s=$(awk -v t="$tokens" -v s="$seconds" 'BEGIN {printf "%.0f", (s > 0 ? t / s : 0)}')
cleanup
say "logs in $run_dir"
say "the weights live on in $run_dir/checkpoints (one directory per shard):"
say "  sample from them:    deploy/local/up.sh --resume=$run_dir --seconds=0"
say "  train on from them:  deploy/local/up.sh --resume=$run_dir --seconds=180"
echo "final: val_loss=$val_loss tokens=$tokens tokens_per_s=$tokens_per_s"
