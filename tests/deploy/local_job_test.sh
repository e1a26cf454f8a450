#!/usr/bin/env bash
# deploy.LocalJob: the main job as a new user runs it, deploy/local/up.sh,
# with the commands the README gives for a running job (scale.sh up, status,
# down) and for the weights it leaves behind (--resume, to sample and to
# train on). Checks what the user sees: trainers join and drain without
# stray errors, the second trainer of a fresh job does not claim to resume,
# the end names the checkpoints and the commands that use them, and those
# commands work: sampling from the checkpoints gives the final validation
# loss again, training on starts from the saved step.
#
#   tests/deploy/local_job_test.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "[local-job-test $(date +%T)] $*"; }
fail() { echo "[local-job-test] FAIL: $*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-local-job-test-XXXXXX")
job_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  [ -n "$job_pid" ] && kill -INT "$job_pid" 2>/dev/null && wait "$job_pid" 2>/dev/null
  if [ $status -ne 0 ]; then
    for f in "$work"/*.log "$work"/spotps-run-*/*.log; do
      [ -f "$f" ] && { echo "== $f"; tail -n 12 "$f"; }
    done >&2
  fi
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# up.sh makes its run directory under TMPDIR: inside ours, removed with it.
export TMPDIR=$work

cd "$repo"
say "starting deploy/local/up.sh --seconds=40"
deploy/local/up.sh --seconds=40 > "$work/up.log" 2>&1 &
job_pid=$!
for _ in $(seq 600); do
  grep -q "starting 2 trainers" "$work/up.log" && [ -f .cache/local-job.env ] && break
  kill -0 "$job_pid" 2>/dev/null || fail "up.sh ended before its trainers started"
  sleep 0.5
done
grep -q "starting 2 trainers" "$work/up.log" || fail "up.sh did not start its trainers"

deploy/local/scale.sh up 1 > "$work/scale-up.log" 2>&1 || fail "scale.sh up failed"
grep -q "trainer-2 joined" "$work/scale-up.log" || fail "scale.sh up: no trainer joined"
! grep -q "grep:\|No such file" "$work/scale-up.log" || fail "scale.sh up printed an error"
deploy/local/scale.sh status > "$work/scale-status.log" 2>&1 || fail "scale.sh status failed"
grep -q "trainer-2 (pid" "$work/scale-status.log" || fail "status does not list trainer-2"
deploy/local/scale.sh down 1 > "$work/scale-down.log" 2>&1 || fail "scale.sh down failed"
grep -q "trainer-2 drained: summary: .* val_loss=- " "$work/scale-down.log" ||
  fail "trainer-2 did not drain with a dash for the validation loss it never measured"

wait "$job_pid" || fail "up.sh exited $?"
job_pid=""
grep -q "^final: val_loss=[0-9.]* tokens=[1-9]" "$work/up.log" || fail "no final line"
final=$(sed -n 's/^final: val_loss=\([0-9.]*\) .*/\1/p' "$work/up.log")
grep -q "initialised the shards with this trainer's weights" "$work/up.log" ||
  fail "no trainer said it initialised the shards"
grep -q "another trainer initialised the model moments ago" "$work/up.log" ||
  fail "the second trainer did not say another one initialised the model"
! grep -q "training goes on from their weights" "$work/up.log" ||
  fail "a trainer of a fresh job claims to go on from earlier weights"
sample=$(sed -n 's/^\[up\]   sample from them: *//p' "$work/up.log")
train_on=$(sed -n 's/^\[up\]   train on from them: *//p' "$work/up.log")
[ -n "$sample" ] && [ -n "$train_on" ] || fail "up.sh did not say how to use its checkpoints"
run_dir=$(sed -n 's/^\[up\] the weights live on in \(.*\)\/checkpoints .*/\1/p' "$work/up.log")
ls "$run_dir"/checkpoints/shard0/*.ckpt > /dev/null || fail "no checkpoint in $run_dir"

say "sampling from the checkpoints: $sample"
$sample > "$work/sample.log" 2>&1 || fail "'$sample' failed"
resumed=$(sed -n 's/^final: val_loss=\([0-9.]*\) .*/\1/p' "$work/sample.log")
[ "$resumed" = "$final" ] ||
  fail "the checkpoints hold other weights: val_loss $resumed after resuming, $final at the end"

say "training on: ${train_on/--seconds=180/--seconds=10}"
${train_on/--seconds=180/--seconds=10} > "$work/train-on.log" 2>&1 || fail "training on failed"
grep -q "the shards hold the model at global step [1-9][0-9]*: training goes on" \
  "$work/train-on.log" || fail "the resumed trainers did not start from the saved step"
grep -q "^final: val_loss=[0-9.]* tokens=[1-9]" "$work/train-on.log" ||
  fail "training on trained nothing"
echo "local job: val_loss=$final resumed_val_loss=$resumed"
