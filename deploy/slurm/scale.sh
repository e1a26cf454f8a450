#!/usr/bin/env bash
# Scales and watches the spotps job that deploy/slurm/submit.sh submitted.
#
#   deploy/slurm/scale.sh [--job_dir=DIR] up [N]      N more trainers: sbatch --array of new indices
#   deploy/slurm/scale.sh [--job_dir=DIR] down [N]    scancel the N newest trainer tasks; they drain
#   deploy/slurm/scale.sh [--job_dir=DIR] tasks       running and pending trainer tasks
#   deploy/slurm/scale.sh [--job_dir=DIR] status [--json]   spotps-ctl status of the job
#   deploy/slurm/scale.sh [--job_dir=DIR] wait-done [--timeout_s=S]   until every unit is committed
#   deploy/slurm/scale.sh [--job_dir=DIR] stop        drain every trainer, then stop the shards
#
# DIR defaults to $SPOTPS_SLURM_JOB_DIR, else .cache/slurm-job. Trainer
# indices (= array task ids = --worker_index) are never reused, so each
# task has its own log, JOB_DIR/trainer-<index>.log, kept across requeues.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=deploy/shell-lib.sh
source "$repo/deploy/shell-lib.sh"
job_dir=${SPOTPS_SLURM_JOB_DIR:-$repo/.cache/slurm-job}
say() { echo "[slurm-scale] $*"; }
die() { echo "scale.sh: $*" >&2; exit 1; }
print_usage() { sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "scale.sh: $*" >&2; print_usage >&2; exit 2; }

case "${1:-}" in --job_dir=*) job_dir=${1#*=}; shift ;; esac
case "$job_dir" in /*) ;; *) job_dir=$PWD/$job_dir ;; esac

load_job() {
  [ -f "$job_dir/job.env" ] || die "no job in $job_dir (submit one: deploy/slurm/submit.sh)"
  # shellcheck source=/dev/null
  source "$job_dir/job.env"
}

# "arrayjob task state" of every trainer task still in the queue, by task id.
trainer_tasks() {
  squeue -h -r -n "$SPOTPS_NAME-trainers" -o '%F %K %T' | sort -k2,2n
}

scale_up() {
  local n=$1 first last job
  load_job
  [ -s "$job_dir/ps.addresses" ] || die "the shards do not serve yet ($job_dir/ps.addresses is missing)"
  # One scale.sh at a time per job, so that two never take the same indices.
  exec 9>> "$job_dir/next-index.lock"
  flock 9
  first=$(cat "$job_dir/next-index" 2>/dev/null || echo 0)
  last=$(( first + n - 1 ))
  # SIGTERM reaches the batch shell DRAIN_S + 10 s before the time limit;
  # preemption and scancel send SIGTERM and give KillWait before SIGKILL.
  job=$(sbatch --parsable --job-name="$SPOTPS_NAME-trainers" --partition="$SPOTPS_SPOT_PARTITION" \
      --array="$first-$last" --ntasks=1 --cpus-per-task="$SPOTPS_THREADS" --time="$SPOTPS_TIME" \
      --requeue --signal="B:TERM@$(( SPOTPS_DRAIN_S + 10 ))" --open-mode=append \
      --output="$job_dir/trainer-%a.log" "$repo/deploy/slurm/trainer.sbatch" "$job_dir")
  job=${job%%;*}
  echo $(( last + 1 )) > "$job_dir/next-index"
  echo "$job $first $last" >> "$job_dir/trainer-jobs"
  say "trainers $first..$last: array job $job on partition $SPOTPS_SPOT_PARTITION"
}

# Reports how trainer task $1 ended; fails if it did not drain.
report_drained() {
  local index=$1 log=$job_dir/trainer-$1.log
  local last_exit
  last_exit=$(grep "^trainer.sbatch: trainer-$index exited with status" "$log" 2>/dev/null | tail -n 1)
  if [[ "$last_exit" != *" status 0 at "* ]]; then
    echo "scale.sh: trainer-$index did not drain cleanly (${last_exit:-no exit line}); see $log" >&2
    return 1
  fi
  say "trainer-$index drained: $(grep '^summary: ' "$log" | tail -n 1)"
}

# Cancels the given "arrayjob task" lines and waits until they left the queue.
cancel_tasks() {
  local ids=() t
  for t in "$@"; do ids+=("${t% *}_${t#* }"); done
  scancel "${ids[@]}"
  for _ in $(seq $(( (SPOTPS_DRAIN_S + 60) * 10 ))); do
    local left=0
    for t in "${ids[@]}"; do [ -n "$(squeue -h -j "$t" -o %i 2>/dev/null)" ] && left=1; done
    [ $left -eq 0 ] && return 0
    sleep 0.1
  done
  die "tasks ${ids[*]} still in the queue $(( SPOTPS_DRAIN_S + 60 )) s after scancel"
}

scale_down() {
  local n=$1 victims=() v ok=0
  load_job
  # Pending tasks go first (nothing to drain), then the newest running ones.
  mapfile -t victims < <(trainer_tasks | awk '$3 != "RUNNING" {print $1, $2}' | tac)
  mapfile -t -O "${#victims[@]}" victims < <(trainer_tasks | awk '$3 == "RUNNING" {print $1, $2}' | tac)
  victims=("${victims[@]:0:$n}")
  [ ${#victims[@]} -gt 0 ] || die "no trainer task is queued or running"
  say "cancelling trainer tasks: $(printf '%s ' "${victims[@]/ /_}")(SIGTERM: they drain)"
  cancel_tasks "${victims[@]}"
  for v in "${victims[@]}"; do report_drained "${v#* }" || ok=1; done
  return $ok
}

stop_job() {
  load_job
  local tasks=()
  mapfile -t tasks < <(trainer_tasks | awk '{print $1, $2}')
  if [ ${#tasks[@]} -gt 0 ]; then
    say "draining ${#tasks[@]} trainer task(s)"
    cancel_tasks "${tasks[@]}"
  fi
  local shard_job
  shard_job=$(cat "$job_dir/shard-job" 2>/dev/null || true)
  if [ -n "$shard_job" ] && [ -n "$(squeue -h -j "$shard_job" -o %i 2>/dev/null)" ]; then
    say "stopping the shards (job $shard_job)"
    scancel "$shard_job"
    for _ in $(seq 600); do
      [ -z "$(squeue -h -j "$shard_job" -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
    [ -z "$(squeue -h -j "$shard_job" -o %i 2>/dev/null)" ] ||
      die "the shard job $shard_job is still in the queue after 60 s"
  fi
  say "stopped; logs and checkpoints stay in $job_dir"
}

ctl() {
  load_job
  [ -s "$job_dir/ps.addresses" ] || die "the shards do not serve ($job_dir/ps.addresses is missing)"
  "$SPOTPS_BIN/spotps-ctl" --ps="$(cat "$job_dir/ps.addresses")" \
      --tokens_per_push=$(( SPOTPS_BATCH * SPOTPS_SEQ_LEN )) "$@"
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  up|down)
    [ $# -le 1 ] || usage_error "$command takes at most one argument"
    count_arg "$@"
    if [ "$command" = up ]; then scale_up "$count"; else scale_down "$count"; fi
    ;;
  tasks) load_job; trainer_tasks ;;
  status)
    [ $# -eq 0 ] || [ "$*" = --json ] || usage_error "status takes only --json"
    ctl status "$@"
    if [ $# -eq 0 ]; then
      echo "trainer tasks (array job, index, state):"
      trainer_tasks | sed 's/^/  /'
    fi
    ;;
  wait-done) ctl wait-done "$@" ;;
  stop) [ $# -eq 0 ] || usage_error "stop takes no argument"; stop_job ;;
  -h|--help) print_usage ;;
  "") usage_error "no command given" ;;
  *) usage_error "unknown command '$command'" ;;
esac
