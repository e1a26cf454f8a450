#!/usr/bin/env bash
# deploy.ContainerJob: the container image, built and run for real.
#
#   tests/deploy/container_job_test.sh SOURCE_DIR BUILD_DIR BIN_DIR
#
# Builds the image with deploy/docker/build.sh (on a local base made by
# mmdebstrap from apt's mirror) and runs a job of containers on the host
# network: 2 shards, each with its checkpoint directory mounted as a volume,
# and 2 trainers on the corpus inside the image. Mid-run one trainer
# container is killed (SIGKILL) and another started, and shard 1's container
# is killed and a new one started on the same volume (it restores its
# checkpoint). Every unit of every epoch must be committed exactly once, and
# `podman stop` (SIGTERM to PID 1, the entry point exec'd into spotps-ps)
# must end the shards with exit status 0. The test's own processes query the
# cluster with BIN_DIR's spotps-ctl.
#
# Must run as root with podman, runc and mmdebstrap installed (deploy/
# install-deps.sh): a missing piece fails the test, it never skips.
set -euo pipefail
source "$(dirname "$0")/../support/job_status.sh"

[ $# -eq 3 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR BIN_DIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
bin=$(cd "$3" && pwd)
say() { echo "[container-test $(date +%T)] $*"; }
fail() { echo "[container-test] FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "must run as root (rootful podman)"
for b in podman runc mmdebstrap jq; do
  command -v "$b" > /dev/null || fail "$b is missing: run deploy/install-deps.sh"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-container-test-XXXXXX")
chmod 755 "$work"
prefix=spotps-ctest-$$
# This host's podman needs runc, cgroupfs and ulimits it may set
# (docs/deploy.md); containers share the host's network.
cat > "$work/containers.conf" << 'EOF'
[containers]
default_ulimits = ["nofile=1024:4096", "nproc=1024:4096"]
netns = "host"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF=$work/containers.conf

our_containers() { podman ps -a --filter "name=^$prefix-" --format '{{.Names}}'; }
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ $status -ne 0 ]; then
    for c in $(our_containers); do
      echo "== $c"
      podman logs --tail 15 "$c" 2>&1 || true
    done >&2
  fi
  for c in $(our_containers); do podman rm -f -t 0 "$c" > /dev/null 2>&1 || true; done
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Containers of earlier runs killed at their timeout: their test pid is gone.
for c in $(podman ps -a --filter 'name=^spotps-ctest-' --format '{{.Names}}'); do
  pid=${c#spotps-ctest-}
  pid=${pid%%-*}
  kill -0 "$pid" 2> /dev/null || podman rm -f -t 0 "$c" > /dev/null 2>&1 || true
done

say "building the image"
version=$(sed -n 's/^project(spotps VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# The image this build replaces: removed once untagged, so that runs of
# this test do not pile up gigabytes of old images.
previous=$(podman image inspect --format '{{.Id}}' "spotps:$version" 2> /dev/null || true)
build_log=$work/build.log
"$src/deploy/docker/build.sh" --build_dir="$build" --local_base > "$build_log" 2>&1 ||
  { tail -n 30 "$build_log" >&2; fail "deploy/docker/build.sh failed"; }
built=$(tail -n 1 "$build_log")
say "$built"
image=$(sed -n 's/^build.sh: built \([^ ]*\) .*/\1/p' <<< "$built")
[ -n "$image" ] || fail "build.sh's last line names no image: $built"
[ "$image" = "spotps:$version" ] || fail "the image is $image, not spotps:$version"
if [ -n "$previous" ] && [ "$(podman image inspect --format '{{.Id}}' "$image")" != "$previous" ]; then
  podman rmi "$previous" > /dev/null 2>&1 || true  # Still in use: left alone.
fi
# The tag deploy/k8s runs is the one the build produces.
grep -rq "image: spotps:$version" "$src/deploy/k8s" || fail "deploy/k8s does not run spotps:$version"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p0=$(free_port)
p1=$(free_port)
while [ "$p1" = "$p0" ]; do p1=$(free_port); done
ps_addresses=127.0.0.1:$p0,127.0.0.1:$p1
epochs=2
units=1000
for i in 0 1; do
  mkdir -p "$work/checkpoints$i"
  chown 10001:10001 "$work/checkpoints$i"  # the image's user
done

lease=--unit_lease_s=10
# start_shard I: shard I's container on its port and its volume.
start_shard() {
  local i=$1 port
  port=$([ "$i" -eq 0 ] && echo "$p0" || echo "$p1")
  podman run -d --name "$prefix-ps$i-$RANDOM" -e SPOTPS_PS="$ps_addresses" \
    -e SPOTPS_SHARD_INDEX="$i" \
    -e SPOTPS_SHARD0_ARGS="--epochs=$epochs --units_per_epoch=$units --worker_lease_s=3 $lease" \
    -v "$work/checkpoints$i:/var/lib/spotps/checkpoints" "$image" \
    ps --listen="127.0.0.1:$port" --checkpoint_dir=/var/lib/spotps/checkpoints \
    --checkpoint_every_s=2 > /dev/null
}
start_trainer() {
  podman run -d --name "$prefix-trainer-$1" -e SPOTPS_PS="$ps_addresses" "$image" \
    trainer --model=tiny --data=/usr/share/spotps/corpus/kjv.tokens --batch=8 --seq_len=64 \
    --threads=1 --eval_batches=0 --log_every=50 --ps_timeout_s=60 > /dev/null
}
shard_container() { podman ps -a --filter "name=^$prefix-ps$1-" --format '{{.Names}}' | tail -n 1; }

status_json() { "$bin/spotps-ctl" --ps="$ps_addresses" status --json --sample_s=0 2> /dev/null; }
# Waits until shard $1 has written a checkpoint (fails after 60 s).
wait_checkpoint() {
  for _ in $(seq 240); do
    [ "$(status_json | jq -r ".shards[$1].last_checkpoint_id // 0 | tonumber")" -gt 0 ] && return 0
    sleep 0.25
  done
  fail "shard $1 wrote no checkpoint in 60 s"
}

start_s=$SECONDS
start_shard 1
start_shard 0
start_trainer 1
start_trainer 2
wait_committed 20 180
say "2 shard and 2 trainer containers; $(committed) units committed"

say "killing trainer-1 (SIGKILL) and starting trainer-3"
podman kill -s KILL "$prefix-trainer-1" > /dev/null
start_trainer 3
wait_committed 60 180

wait_checkpoint 1
old=$(shard_container 1)
say "killing shard 1's container $old (SIGKILL) and starting a new one on its volume"
podman kill -s KILL "$old" > /dev/null
podman wait "$old" > /dev/null || true
start_shard 1
restored=0
for _ in $(seq 240); do
  restored=$(status_json | jq -r '.shards[1].restored_checkpoint_id // 0 | tonumber' || echo 0)
  [ "$restored" -gt 0 ] && break
  sleep 0.25
done
[ "$restored" -gt 0 ] || fail "the new shard 1 did not restore a checkpoint from its volume"
say "shard 1 restored checkpoint $restored; $(committed) units committed"

say "waiting for the job to finish"
"$bin/spotps-ctl" --ps="$ps_addresses" wait-done --timeout_s=300 --print_every_s=15 ||
  fail "the job did not finish"
final=$(status_json)
echo "$final" | jq -c '.coordinator | {done, epochs}'
for e in $(seq 0 $((epochs - 1))); do
  [ "$(jq ".coordinator.epochs[$e].committed" <<< "$final")" -eq $units ] ||
    fail "epoch $e: not every unit committed"
done
duplicated=$(jq '[.coordinator.epochs[].duplicated] | add' <<< "$final")
[ "$duplicated" -eq 0 ] || fail "$duplicated units were committed twice"
reissued=$(jq '[.coordinator.epochs[].reissued] | add' <<< "$final")

# The trainers leave once the job is done; exit status 0 each.
for t in 2 3; do
  code=$(timeout 60 podman wait "$prefix-trainer-$t") || fail "trainer-$t did not exit"
  [ "$code" -eq 0 ] || fail "trainer-$t exited with status $code"
done
# podman stop sends SIGTERM to PID 1: spotps-ps itself (the entry point
# execs it), which must checkpoint and exit 0.
for i in 1 0; do
  c=$(shard_container "$i")
  podman stop -t 30 "$c" > /dev/null
  code=$(podman inspect --format '{{.State.ExitCode}}' "$c")
  [ "$code" -eq 0 ] || fail "shard $i's container exited with status $code after SIGTERM"
  # Read whole first: grep -q stops at its match, and under pipefail the
  # SIGPIPE that podman logs may then get would fail the check.
  logs=$(podman logs "$c" 2>&1)
  grep -q "got signal 15, shutting down" <<< "$logs" ||
    fail "shard $i did not log the SIGTERM it got"
done
size_mb=$(sed -n 's/.*(\([0-9]*\) MB).*/\1/p' <<< "$built")
echo "container: image=$image size_mb=$size_mb units=$((epochs * units))" \
  "duplicated=$duplicated reissued=$reissued restored_checkpoint=$restored" \
  "seconds=$((SECONDS - start_s))"
