#!/usr/bin/env bash
# deploy.SlurmJobTest: a spotps job through deploy/slurm/ on a live one-node
# Slurm cluster (deploy/slurm/local-cluster.sh). Shards go in as one job,
# trainers as a job array on the `spot` partition; the test scales the
# trainers 2 -> 3 with sbatch, has a job on `ondemand` preempt one (it
# drains and is requeued), scales 3 -> 1 with scancel (they drain), waits
# for the job to finish and checks that every unit of every epoch was
# committed. Then it stops the cluster and checks no process is left.
#
#   tests/deploy/slurm_job_test.sh BIN_DIR
#
# Must run as root with slurm-wlm, munge and jq installed: a missing piece
# fails the test, it never skips.
set -euo pipefail
source "$(dirname "$0")/../support/test_corpus.sh"
source "$(dirname "$0")/../support/job_status.sh"

bin=${1:?usage: slurm_job_test.sh BIN_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "[slurm-test $(date +%T)] $*"; }
fail() { echo "[slurm-test] FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "must run as root (slurmd runs jobs as their owner)"
for b in sbatch squeue scancel scontrol slurmctld slurmd munged jq; do
  command -v "$b" > /dev/null || fail "$b is missing: run deploy/install-deps.sh (slurm-wlm, munge, jq)"
done

# Clusters of earlier runs that died without cleaning up (killed at their
# timeout): their owner pid is gone.
for old in "${TMPDIR:-/tmp}"/spotps-slurm-test-*; do
  [ -f "$old/owner.pid" ] || continue
  kill -0 "$(cat "$old/owner.pid")" 2>/dev/null && continue
  echo "[slurm-test] sweeping the leftovers of a dead run in $old"
  "$repo/deploy/slurm/local-cluster.sh" stop "$old/cluster" > /dev/null 2>&1 || true
  for pid in $(pgrep -f -- "$old" || true); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$old"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-slurm-test-XXXXXX")
chmod 755 "$work"
echo $$ > "$work/owner.pid"
cluster=$work/cluster
job=$work/job
# Processes of this test: anything whose command line names $work.
our_processes() { pgrep -f -- "$work" || true; }
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  "$repo/deploy/slurm/local-cluster.sh" stop "$cluster" > /dev/null 2>&1 || true
  local left
  left=$(our_processes)
  if [ -n "$left" ]; then
    echo "[slurm-test] killing leftovers: $left" >&2
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
  fi
  if [ $status -ne 0 ]; then
    for f in "$job"/*.log "$cluster"/log/slurmctld.log; do
      [ -f "$f" ] && { echo "== $f"; tail -n 15 "$f"; }
    done >&2
  fi
  if [ -n "${SPOTPS_KEEP_TEST_DIRS:-}" ]; then echo "[slurm-test] kept $work" >&2; else rm -rf "$work"; fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make_test_corpus "$bin" "$work" || fail "spotps-tokenize failed"

start_s=$SECONDS
eval "$("$repo/deploy/slurm/local-cluster.sh" start "$cluster" | grep '^export SLURM_CONF=')"
[ -n "${SLURM_CONF:-}" ] || fail "local-cluster.sh start printed no SLURM_CONF"
say "cluster up in $((SECONDS - start_s)) s"

# Sized so that three fast trainers cannot finish the job before the
# scale-down below (a fast machine trains ~100 units/s with three).
epochs=2
units=1000
"$repo/deploy/slurm/submit.sh" --job_dir="$job" --bin="$bin" --data="$work/corpus.tokens" \
    --epochs=$epochs --units_per_epoch=$units --batch=8 --seq_len=64 --trainers=2 --drain_s=5 \
    --checkpoint_every_s=5 --shard_flags="--worker_lease_s=3 --unit_lease_s=10"
scale() { "$repo/deploy/slurm/scale.sh" --job_dir="$job" "$@"; }

status_json() { scale status --json 2> /dev/null; }
live_workers() { status_json | jq '.coordinator.workers | length'; }
# Waits until $1 trainers are registered (fails after $2 s). With $3 =
# or_done, a job that finished meanwhile also ends the wait: its last
# trainers exit once every unit is committed.
wait_workers() {
  local want=$1 limit=$2 or_done=${3:-} w=0
  for _ in $(seq $((limit * 4))); do
    if [ "$or_done" = or_done ] && [ "$(status_json | jq '.coordinator.done')" = true ]; then
      return 0
    fi
    w=$(live_workers || echo 0)
    [ "$w" -eq "$want" ] && return 0
    sleep 0.25
  done
  fail "$w live trainers after ${limit} s (wanted $want)"
}
running_tasks() { scale tasks | awk '$3 == "RUNNING"' | wc -l; }

wait_workers 2 90
wait_committed 60 120
say "2 trainers, $(committed) units committed; scaling up to 3 (sbatch --array)"
scale up 1
wait_workers 3 90 or_done
wait_committed 200 120
[ "$(running_tasks)" -eq 3 ] || fail "expected 3 running trainer tasks"

# Preemption: a job on `ondemand` that needs one slot more than is free.
total=$(scontrol show node -o | sed -n 's/.* CPUTot=\([0-9]*\) .*/\1/p')
alloc=$(scontrol show node -o | sed -n 's/.* CPUAlloc=\([0-9]*\) .*/\1/p')
need=$(( total - alloc + 1 ))
say "preempting a spot trainer: an ondemand job for $need of $total slots ($alloc allocated)"
blocker=$(sbatch --parsable --partition=ondemand --ntasks="$need" --job-name=blocker \
    --output="$work/blocker.log" --wrap 'sleep 3')
requeued=""
for _ in $(seq 240); do
  requeued=$(grep -l 'restart=1' "$job"/trainer-*.log 2>/dev/null | head -n 1 || true)
  [ -n "$requeued" ] && break
  sleep 0.25
done
[ -n "$requeued" ] || fail "no spot trainer was preempted and requeued within 60 s (blocker job $blocker)"
grep -q 'drain: signal 15' "$requeued" || fail "the preempted trainer did not drain; see $requeued"
say "preempted and requeued: $(grep -h '^summary: ' "$requeued" | head -n 1 | cut -c1-60)...; restarted"
wait_workers 3 90 or_done

say "$(committed) units committed; scaling down to 1 (scancel 2 tasks)"
scale down 2
tasks=$(running_tasks)
if [ "$tasks" -ne 1 ]; then
  # Zero is right only when the last trainer finished the job meanwhile.
  [ "$tasks" -eq 0 ] && [ "$(status_json | jq '.coordinator.done')" = true ] ||
    fail "expected 1 running trainer task after scancel, found $tasks"
fi
wait_workers 1 30 or_done

say "waiting for the job to finish"
scale wait-done --timeout_s=300 --print_every_s=10
final=$(status_json)
echo "$final" | jq -c '.coordinator | {done, epochs}'
[ "$(echo "$final" | jq '.coordinator.done')" = true ] || fail "the job is not done"
lost=$(echo "$final" | jq '[.coordinator.epochs[] | .units - .committed] | add')
[ "$lost" -eq 0 ] || fail "$lost units were never committed"
[ "$(echo "$final" | jq '.coordinator.epochs | length')" -eq $epochs ] || fail "wrong number of epochs"
for e in $(seq 0 $((epochs - 1))); do
  [ "$(echo "$final" | jq ".coordinator.epochs[$e].committed")" -eq $units ] ||
    fail "epoch $e: not every unit committed"
done
duplicated=$(echo "$final" | jq '[.coordinator.epochs[].duplicated] | add')
reissued=$(echo "$final" | jq '[.coordinator.epochs[].reissued] | add')
applied=$(echo "$final" | jq '.shards[0].pushes_applied')

# Every trainer run (requeued ones twice) ended with exit status 0.
runs=$(cat "$job"/trainer-*.log | grep -c '^trainer.sbatch: trainer-.* exited with status' || true)
bad=$(cat "$job"/trainer-*.log | grep '^trainer.sbatch: trainer-.* exited with status' |
      grep -vc 'status 0 at' || true)
[ "$bad" -eq 0 ] || fail "$bad trainer run(s) exited non-zero"
trained=$(cat "$job"/trainer-*.log | sed -n 's/^summary: .* units=\([0-9]*\) .*/\1/p' |
          awk '{s += $1} END {print s + 0}')
tokens_per_s=$(cat "$job"/trainer-*.log | sed -n 's/^summary: .* tokens_per_s=\([0-9]*\) .*/\1/p' |
          awk '{s += $1; n++} END {printf "%.0f", n ? s / n : 0}')
scale stop
"$repo/deploy/slurm/local-cluster.sh" stop "$cluster"

left=$(our_processes)
[ -z "$left" ] || fail "processes left behind: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
for d in slurmctld slurmd munged slurmstepd; do
  for pid in $(pgrep -x "$d" || true); do
    # Read whole first: grep -q stops at its match, and under pipefail the
    # writer's SIGPIPE would fail the pipeline and hide a leftover.
    environ=$({ tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null || true)
    grep -qF "$work" <<< "$environ" && fail "$d (pid $pid) of this test still runs"
  done
done
echo "slurm: units=$((epochs * units)) committed=$((epochs * units - lost)) duplicated=$duplicated" \
     "reissued=$reissued pushes_applied=$applied trainer_runs=$runs units_trained=$trained" \
     "mean_trainer_tokens_per_s=$tokens_per_s seconds=$((SECONDS - start_s))"
