#!/usr/bin/env bash
# One spotps-ps shard as a Slurm job step (deploy/slurm/shards.sbatch starts
# one per shard with srun). Listens on every interface of the node it landed
# on, on a free port, and publishes HOST:PORT in JOB_DIR/shard<INDEX>.addr
# for shard 0 (--peers) and the trainers.
#
#   shard-step.sh JOB_DIR INDEX [spotps-ps flags...]
#
# HOST is $SPOTPS_ADVERTISE_HOST if set, else this node's hostname. SIGTERM
# (scancel) stops the shard: it finishes in-flight RPCs and exits 0.
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 JOB_DIR INDEX [spotps-ps flags...]" >&2; exit 2; }
job_dir=$1
index=$2
shift 2
# shellcheck source=/dev/null
source "$job_dir/job.env"
# shellcheck source=deploy/shell-lib.sh
source "$SPOTPS_REPO/deploy/shell-lib.sh"

# submit.sh --shard_flags: extra spotps-ps flags, split on spaces.
read -r -a extra_flags <<< "$SPOTPS_SHARD_FLAGS"
port_file=$job_dir/shard$index.port
rm -f "$port_file" "$job_dir/shard$index.addr"
"$SPOTPS_BIN/spotps-ps" --listen=0.0.0.0:0 --insecure --port_file="$port_file" \
    --shard_index="$index" --num_shards="$SPOTPS_SHARDS" --optimizer=adamw --lr="$SPOTPS_LR" \
    --warmup_steps=50 --weight_decay=0.01 --beta2=0.99 --consistency="$SPOTPS_CONSISTENCY" \
    --checkpoint_dir="$job_dir/checkpoints/shard$index" "$@" "${extra_flags[@]}" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM INT

for _ in $(seq 600); do
  [ -s "$port_file" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$port_file" ]; then
  echo "shard-step: shard $index did not report its port" >&2
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  exit 1
fi
host=${SPOTPS_ADVERTISE_HOST:-$(hostname)}
echo "$host:$(cat "$port_file")" > "$job_dir/shard$index.addr.tmp"
mv "$job_dir/shard$index.addr.tmp" "$job_dir/shard$index.addr"
echo "shard-step: shard $index serves at $host:$(cat "$port_file") (node ${SLURMD_NODENAME:-?})"

status=0
wait_for_child "$pid" || status=$?
echo "shard-step: shard $index exited with status $status"
exit "$status"
