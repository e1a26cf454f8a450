#!/usr/bin/env bash
# Submits a spotps job to Slurm: the shards as one job on the `ondemand`
# partition (one step per shard), then the trainers as a job array on the
# `spot` partition (--requeue, --signal=B:TERM@N: they drain when told to
# stop and are requeued when preempted).
#
#   deploy/slurm/submit.sh [--job_dir=DIR] [--name=spotps] [--shards=2] [--trainers=2]
#       [--model=tiny] [--data=TOKENS] [--epochs=1] [--units_per_epoch=N] [--batch=8]
#       [--seq_len=128] [--lr=1e-3] [--dtype=bf16] [--consistency=async|ssp:S|sync]
#       [--threads=1] [--drain_s=10] [--time=24:00:00] [--checkpoint_every_s=30]
#       [--shard_flags="..."] [--trainer_flags="..."] [--bin=DIR] [--advertise_host=HOST]
#       [--spot_partition=spot] [--shard_partition=ondemand]
#
# JOB_DIR (default .cache/slurm-job) must be on a file system every node
# sees, and so must the repository and --bin (default build/bin): logs,
# checkpoints and the shard addresses go there. Without --data the King
# James Bible is prepared as deploy/local/up.sh does. Then use
# deploy/slurm/scale.sh (up, down, status, wait-done, stop). Needs SLURM_CONF
# (or /etc/slurm) pointing at the cluster; for a one-node test cluster see
# deploy/slurm/local-cluster.sh.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
job_dir=$repo/.cache/slurm-job
name=spotps
shards=2
trainers=2
model=tiny
data=""
epochs=1
units=""
batch=8
seq_len=128
lr=1e-3
dtype=bf16
consistency=async
threads=1
drain_s=10
time_limit=24:00:00
checkpoint_every_s=30
shard_flags=""
trainer_flags=""
bin=$repo/build/bin
advertise_host=""
spot_partition=spot
shard_partition=ondemand
for arg in "$@"; do
  case "$arg" in
    --job_dir=*) job_dir=${arg#*=} ;;
    --name=*) name=${arg#*=} ;;
    --shards=*) shards=${arg#*=} ;;
    --trainers=*) trainers=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --data=*) data=${arg#*=} ;;
    --epochs=*) epochs=${arg#*=} ;;
    --units_per_epoch=*) units=${arg#*=} ;;
    --batch=*) batch=${arg#*=} ;;
    --seq_len=*) seq_len=${arg#*=} ;;
    --lr=*) lr=${arg#*=} ;;
    --dtype=*) dtype=${arg#*=} ;;
    --consistency=*) consistency=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --drain_s=*) drain_s=${arg#*=} ;;
    --time=*) time_limit=${arg#*=} ;;
    --checkpoint_every_s=*) checkpoint_every_s=${arg#*=} ;;
    --shard_flags=*) shard_flags=${arg#*=} ;;
    --trainer_flags=*) trainer_flags=${arg#*=} ;;
    --bin=*) bin=${arg#*=} ;;
    --advertise_host=*) advertise_host=${arg#*=} ;;
    --spot_partition=*) spot_partition=${arg#*=} ;;
    --shard_partition=*) shard_partition=${arg#*=} ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "submit.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "[slurm-submit] $*"; }
die() { echo "submit.sh: $*" >&2; exit 1; }
for n in shards trainers threads drain_s epochs; do
  [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: --$n must be a positive integer" >&2; exit 2; }
done
case "$job_dir" in /*) ;; *) job_dir=$PWD/$job_dir ;; esac
case "$bin" in /*) ;; *) bin=$PWD/$bin ;; esac
command -v sbatch > /dev/null || die "sbatch not found: install slurm-wlm (deploy/install-deps.sh)"
for b in spotps-ps spotps-trainer spotps-ctl; do
  [ -x "$bin/$b" ] || die "$bin/$b is missing; build first: cmake --build build"
done
squeue -h -o %i > /dev/null 2>&1 ||
  die "cannot reach slurmctld (is SLURM_CONF set? try: eval \"\$(deploy/slurm/local-cluster.sh env)\")"
if [ -f "$job_dir/job.env" ]; then
  # shellcheck source=/dev/null
  running=$(source "$job_dir/job.env"; squeue -h -n "$SPOTPS_NAME-shards,$SPOTPS_NAME-trainers" -o %i)
  [ -z "$running" ] ||
    die "$job_dir belongs to a job that still runs ($running); stop it: deploy/slurm/scale.sh --job_dir=$job_dir stop"
fi

if [ -z "$data" ]; then
  say "preparing the KJV corpus"
  "$repo/trainer/data/prepare_corpus.sh" "$repo/.cache/corpus" "$bin/spotps-tokenize"
  data=$repo/.cache/corpus/kjv.tokens
fi
case "$data" in /*) ;; *) data=$PWD/$data ;; esac
[ -s "$data" ] || die "no token file at $data"
# One work unit is one trainer step; by default an epoch is about one pass
# over the training tokens (2 bytes per token), as in deploy/local/up.sh.
[ -n "$units" ] || units=$(( $(stat -c %s "$data") / 2 * 95 / 100 / (batch * seq_len) ))

rm -rf "$job_dir"
mkdir -p "$job_dir"
{
  echo "# The spotps job submitted by deploy/slurm/submit.sh; read by its batch scripts and scale.sh."
  printf 'SPOTPS_%s=%q\n' REPO "$repo" BIN "$bin" NAME "$name" SHARDS "$shards" \
    MODEL "$model" DATA "$data" EPOCHS "$epochs" UNITS "$units" BATCH "$batch" \
    SEQ_LEN "$seq_len" LR "$lr" DTYPE "$dtype" CONSISTENCY "$consistency" THREADS "$threads" \
    DRAIN_S "$drain_s" TIME "$time_limit" CHECKPOINT_EVERY_S "$checkpoint_every_s" \
    SHARD_FLAGS "$shard_flags" TRAINER_FLAGS "$trainer_flags" SPOT_PARTITION "$spot_partition"
  [ -z "$advertise_host" ] || printf 'export SPOTPS_ADVERTISE_HOST=%q\n' "$advertise_host"
} > "$job_dir/job.env"

shard_job=$(sbatch --parsable --job-name="$name-shards" --partition="$shard_partition" \
    --ntasks="$shards" --cpus-per-task=1 --output="$job_dir/shards.log" --open-mode=append \
    "$repo/deploy/slurm/shards.sbatch" "$job_dir")
shard_job=${shard_job%%;*}
echo "$shard_job" > "$job_dir/shard-job"
say "shards: job $shard_job on partition $shard_partition ($shards steps); waiting for them to serve"
for _ in $(seq 1800); do
  [ -s "$job_dir/ps.addresses" ] && break
  if [ -z "$(squeue -h -j "$shard_job" -o %i 2>/dev/null)" ]; then
    sleep 0.5
    [ -s "$job_dir/ps.addresses" ] && break
    tail -n 20 "$job_dir"/shard*.log >&2 2>/dev/null || true
    die "the shard job $shard_job ended before its shards served; logs in $job_dir"
  fi
  sleep 0.1
done
[ -s "$job_dir/ps.addresses" ] ||
  die "the shards did not serve within 3 minutes (is job $shard_job pending? squeue -j $shard_job)"
say "shards serve at $(cat "$job_dir/ps.addresses"): $epochs epoch(s) of $units units"
"$repo/deploy/slurm/scale.sh" --job_dir="$job_dir" up "$trainers"
say "job dir $job_dir; next: deploy/slurm/scale.sh --job_dir=$job_dir status | up N | down N | wait-done | stop"
