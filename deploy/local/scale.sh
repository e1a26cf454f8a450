#!/usr/bin/env bash
# Adds trainers to, and removes them from, the local job deploy/local/up.sh runs.
#
#   deploy/local/scale.sh up [N]      start N more trainers (default 1)
#   deploy/local/scale.sh down [N]    drain the N most recently added ones (default 1)
#   deploy/local/scale.sh status      spotps-ctl status of the job, and the added trainers
#   deploy/local/scale.sh pids [DIR]  pids of the added trainers still running (up.sh uses it)
#
# up.sh writes .cache/local-job.env while its job runs. Added trainers train
# like up.sh's own (same model, data, batch and threads), take the next free
# --worker_index, stop at the job's deadline, log to trainer<index>.log in the
# run directory and are listed in its scaled-trainers file; up.sh stops them
# with the rest.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=deploy/shell-lib.sh
source "$repo/deploy/shell-lib.sh"
job_env=$repo/.cache/local-job.env
say() { echo "[scale] $*"; }
die() { echo "scale.sh: $*" >&2; exit 1; }
print_usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "scale.sh: $*" >&2; print_usage >&2; exit 2; }

# Loads the running job's settings, or explains why there is none.
load_job() {
  [ -f "$job_env" ] ||
    die "no local job is running ($job_env is missing); start one with deploy/local/up.sh"
  # shellcheck source=/dev/null
  source "$job_env"
  if ! kill -0 "$SPOTPS_JOB_PID" 2>/dev/null; then
    rm -f "$job_env"
    die "the local job (up.sh pid $SPOTPS_JOB_PID) is gone; removed its stale $job_env"
  fi
}

# "index pid" of every added trainer of run directory $1 that still runs. A
# pid counts only while it still is that trainer, so a reused pid is never hit.
live_trainers() {
  local list=$1/scaled-trainers index pid
  [ -f "$list" ] || return 0
  while read -r index pid; do
    tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" |
      grep -q -- "spotps-trainer .*--worker_index=$index " && echo "$index $pid"
  done < "$list"
  return 0
}

# The smallest worker index without a log in the run directory: indices are
# never reused, so no log is overwritten.
next_index() {
  local i=0
  while [ -e "$SPOTPS_RUN_DIR/trainer$i.log" ]; do i=$((i + 1)); done
  echo "$i"
}

# Starts one trainer and waits until it has joined (printed its model line).
start_trainer() {
  local index=$1 seconds=$2 log pid
  log=$SPOTPS_RUN_DIR/trainer$index.log
  nohup "$SPOTPS_BIN/spotps-trainer" --ps="$SPOTPS_PS" --model="$SPOTPS_MODEL" \
      --data="$SPOTPS_DATA" --dtype="$SPOTPS_DTYPE" --batch="$SPOTPS_BATCH" \
      --seq_len="$SPOTPS_SEQ_LEN" --max_seconds="$seconds" --threads="$SPOTPS_THREADS" \
      --worker_index="$index" --log_every=20 --eval_batches=0 --metrics_listen=127.0.0.1:0 \
      < /dev/null > "$log" 2>&1 9>&- &
  pid=$!
  echo "$index $pid" >> "$SPOTPS_RUN_DIR/scaled-trainers"
  for _ in $(seq 600); do
    if grep -qs "^\[trainer-$index\] model" "$log"; then
      say "trainer-$index joined (pid $pid, log $log)"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { tail -n 5 "$log" >&2; die "trainer-$index exited at start"; }
    sleep 0.1
  done
  die "trainer-$index (pid $pid) did not join within 60 s; see $log"
}

scale_up() {
  local n=$1 seconds index
  load_job
  seconds=$(( SPOTPS_END_TIME - $(date +%s) ))
  [ "$seconds" -gt 5 ] || die "the job's trainers stop in ${seconds}s: too late to add any"
  # One scale.sh at a time per job, so that two never take the same index.
  exec 9>> "$SPOTPS_RUN_DIR/scaled-trainers.lock"
  flock 9
  for _ in $(seq "$n"); do
    index=$(next_index)
    say "starting trainer-$index for ${seconds}s"
    start_trainer "$index" "$seconds"
  done
}

# Reports how trainer $1 (pid $2) ended; fails if it did not drain.
report_drained() {
  local index=$1 pid=$2 log=$SPOTPS_RUN_DIR/trainer$1.log
  if kill -0 "$pid" 2>/dev/null; then
    echo "scale.sh: trainer-$index (pid $pid) still running after 60 s; see $log" >&2
    return 1
  fi
  # The summary line is the last thing a trainer prints before it exits 0.
  if ! grep -q '^summary: ' "$log"; then
    echo "scale.sh: trainer-$index exited without its summary line; see $log" >&2
    return 1
  fi
  say "trainer-$index drained: $(grep '^summary: ' "$log" | tail -n 1)"
}

scale_down() {
  local n=$1 victims=() index pid alive ok=0
  load_job
  mapfile -t victims < <(live_trainers "$SPOTPS_RUN_DIR" | tail -n "$n")
  [ ${#victims[@]} -gt 0 ] ||
    die "no trainer added by scale.sh is running (up.sh's own are left alone)"
  for v in "${victims[@]}"; do
    read -r index pid <<< "$v"
    say "draining trainer-$index (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
  done
  wait_for_exit 60 "${victims[@]#* }" || true
  for v in "${victims[@]}"; do
    read -r index pid <<< "$v"
    report_drained "$index" "$pid" || ok=1
  done
  return $ok
}

show_status() {
  load_job
  [ -x "$SPOTPS_BIN/spotps-ctl" ] ||
    die "$SPOTPS_BIN/spotps-ctl is missing; build it: cmake --build build --target spotps-ctl"
  "$SPOTPS_BIN/spotps-ctl" --ps="$SPOTPS_PS" \
      --tokens_per_push=$(( SPOTPS_BATCH * SPOTPS_SEQ_LEN )) status
  echo "added by scale.sh (running):$(live_trainers "$SPOTPS_RUN_DIR" |
    awk '{printf " trainer-%s (pid %s)", $1, $2} END {if (NR == 0) printf " none"}')"
  echo "run dir: $SPOTPS_RUN_DIR"
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  up|down)
    [ $# -le 1 ] || usage_error "$command takes at most one argument"
    count_arg "$@"
    if [ "$command" = up ]; then scale_up "$count"; else scale_down "$count"; fi
    ;;
  status) [ $# -eq 0 ] || usage_error "status takes no argument"; show_status ;;
  pids)
    [ $# -le 1 ] || usage_error "pids takes at most one argument"
    if [ $# -eq 1 ]; then run_dir=$1; else load_job; run_dir=$SPOTPS_RUN_DIR; fi
    live_trainers "$run_dir" | awk '{print $2}'
    ;;
  -h|--help) print_usage ;;
  "") usage_error "no command given" ;;
  *) usage_error "unknown command '$command'" ;;
esac
