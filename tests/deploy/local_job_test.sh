#!/usr/bin/env bash
# deploy.LocalJob: the main job as a new user runs it, deploy/local/up.sh,
# and the README's five-minute tour run against it as written (its shell
# blocks in order, in one shell: scale.sh up/down/status, a checkpoint,
# spotps-generate, the client example, an export, the Python example on
# shards of its own; the only rewrite is free ports for its 7000 and 7001),
# then the commands up.sh prints for the weights it leaves behind (--resume,
# to sample and to train on). Checks what the user sees: trainers join and
# drain without stray errors, the second trainer of a fresh job does not
# claim to resume, the end names the checkpoints and the commands that use
# them, and those commands work: sampling from the checkpoints gives the
# final validation loss again, training on starts from the saved step.
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
      [ -f "$f" ] && { echo "== $f"; tail -n 40 "$f"; }
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
say "starting deploy/local/up.sh --seconds=90"
deploy/local/up.sh --seconds=90 > "$work/up.log" 2>&1 &
job_pid=$!
for _ in $(seq 600); do
  grep -q "starting 2 trainers" "$work/up.log" && [ -f .cache/local-job.env ] && break
  kill -0 "$job_pid" 2>/dev/null || fail "up.sh ended before its trainers started"
  sleep 0.5
done
grep -q "starting 2 trainers" "$work/up.log" || fail "up.sh did not start its trainers"

# The tour: every ```sh block of README.md's "A five-minute tour", in order.
ports=$(/usr/bin/python3 -c 'import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
read -r port_a port_b <<< "$ports"
/usr/bin/python3 - README.md "$port_a" "$port_b" > "$work/tour.sh" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
tour = re.search(r"^## A five-minute tour\n(.*?)^## ", text, re.S | re.M).group(1)
blocks = re.findall(r"^```sh\n(.*?)^```", tour, re.S | re.M)
if len(blocks) < 5:
    sys.exit("the README's tour has %d shell blocks" % len(blocks))
print("set -euo pipefail")
for block in blocks:
    print(block.replace("127.0.0.1:7000", "127.0.0.1:" + sys.argv[2])
               .replace("127.0.0.1:7001", "127.0.0.1:" + sys.argv[3]))
EOF
say "running the README's tour ($(grep -c . "$work/tour.sh") lines)"
bash "$work/tour.sh" > "$work/tour.log" 2>&1 || fail "the README's tour failed: $(tail -n 5 "$work/tour.log")"
! grep -q "grep:\|No such file" "$work/tour.log" || fail "the tour printed an error"
grep -q "trainer-3 joined" "$work/tour.log" || fail "scale.sh up 2: trainer-3 did not join"
grep -q "trainer-3 drained: summary: .* val_loss=- " "$work/tour.log" ||
  fail "trainer-3 did not drain with a dash for the validation loss it never measured"
grep -q "trainer-2 (pid" "$work/tour.log" || fail "scale.sh status does not list trainer-2"
grep -q "^checkpoint: id=[0-9]" "$work/tour.log" || fail "no checkpoint round"
grep -q "^eval: val_loss=[0-9.]*" "$work/tour.log" || fail "spotps-generate printed no loss"
grep -q "^wte.weight: [0-9]* elements" "$work/tour.log" || fail "the client example pulled nothing"
[ -s .cache/model.safetensors ] || fail "the export wrote nothing"
grep -q "^initialised a new head" "$work/tour.log" || fail "the Python example did not initialise"
grep -q "^finetune: loss" "$work/tour.log" || fail "the Python example did not train"
rm -f .cache/model.safetensors

wait "$job_pid" || fail "up.sh exited $?"
job_pid=""
grep -q "^final: val_loss=[0-9.]* tokens=[1-9]" "$work/up.log" || fail "no final line"
final=$(sed -n 's/^final: val_loss=\([0-9.]*\) .*/\1/p' "$work/up.log")
# One trainer initialised the shards, or the two raced and split them: then
# each says how many it holds and that the other initialised the rest.
split="initialised [0-9]+ of [0-9]+ shards with this trainer's weights; another trainer"
grep -Eq "initialised the shards with this trainer's weights|$split" "$work/up.log" ||
  fail "no trainer said it initialised the shards"
# The other either lost the race to initialise, found weights nobody has
# trained yet, or joined a few steps in: it says which, never that the shards
# "already hold the model", which read like a resume.
grep -Eq "initialised the model moments ago|no update applied yet|at global step [0-9]+:|$split" \
  "$work/up.log" || fail "the second trainer did not say where its weights come from"
! grep -q "already hold the model" "$work/up.log" || fail "a trainer of a fresh job claims to resume"
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
