#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for trying deploy/slurm/ and for
# its test. Everything lives in one directory; nothing in /etc is touched.
#
#   deploy/slurm/local-cluster.sh start [DIR]   start munged, slurmctld and slurmd
#   deploy/slurm/local-cluster.sh stop [DIR]    cancel every job, stop the daemons
#   deploy/slurm/local-cluster.sh status [DIR]  sinfo and squeue of the cluster
#   deploy/slurm/local-cluster.sh env [DIR]     the line to eval before using sbatch & co
#
# DIR defaults to .cache/slurm-cluster in the repository. `start` prints
#   export SLURM_CONF=DIR/slurm.conf
# which every Slurm client (sbatch, squeue, scancel, scontrol) needs:
#   eval "$(deploy/slurm/local-cluster.sh env)"
# The node declares 4 slots per CPU of this machine (config_overrides), so
# a whole job fits on a small machine, and has two partitions: `ondemand`
# (shards, never preempted) and `spot` (trainers; lower PriorityTier, so a
# job in `ondemand` that needs room preempts spot jobs, which are requeued).
# Must run as root (slurmd starts jobs as their user). Needs Debian's
# slurm-wlm and munge (deploy/install-deps.sh installs them).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "[slurm-local] $*"; }
die() { echo "local-cluster.sh: $*" >&2; exit 1; }
print_usage() { sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "local-cluster.sh: $*" >&2; print_usage >&2; exit 2; }

command=${1:-}
[ $# -gt 0 ] && shift
[ $# -le 1 ] || usage_error "too many arguments"
dir=${1:-$repo/.cache/slurm-cluster}
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac
conf=$dir/slurm.conf

# A TCP port nobody listens on (the daemons bind it a moment later).
free_port() {
  local port
  for _ in $(seq 200); do
    port=$(( 20000 + RANDOM % 30000 ))
    if [ -z "$(ss -Htan "( sport = :$port )" 2>/dev/null)" ]; then
      echo "$port"
      return 0
    fi
  done
  die "no free TCP port found"
}

# True if pid $1 runs a command line that mentions this cluster's directory,
# so a reused pid is never signalled.
ours() {
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$dir"
}

# Starts a daemon in its own session, logging to $dir/log/NAME.out, and
# records its pid in $dir/NAME.pid-started.
start_daemon() {
  local name=$1
  shift
  SLURM_CONF=$conf setsid "$@" < /dev/null > "$dir/log/$name.out" 2>&1 &
  echo $! > "$dir/$name.pid-started"
}

write_config() {
  local node cpus mem ctld_port slurmd_port
  node=$(hostname -s)
  # Slurm's OverSubscribe shares CPUs only among jobs of one partition, and
  # shards and trainers run in two: declare more CPUs than there are.
  cpus=$(( $(nproc) * 4 ))
  # Leave a fifth of the available memory out, so slurmd's check never fails.
  mem=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
  : > "$dir/plugstack.conf"
  cat > "$conf" <<EOF
# Written by deploy/slurm/local-cluster.sh: a one-node cluster in $dir.
ClusterName=spotps-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job starts again cred_expire + 1 s later (default 120).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
# Seconds between SIGTERM and SIGKILL when a job is cancelled, requeued or
# preempted: a trainer's --drain_deadline_s must stay below it.
KillWait=15
SchedulerParameters=batch_sched_delay=0,bf_interval=1,sched_interval=2
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=ondemand Nodes=$node Default=YES MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
PartitionName=spot Nodes=$node MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
EOF
}

start() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (slurmd starts jobs as their owner)"
  local missing=()
  for b in munged mungekey slurmctld slurmd sinfo; do
    command -v "$b" > /dev/null || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] ||
    die "missing ${missing[*]}: install slurm-wlm and munge (deploy/install-deps.sh)"
  if [ -f "$dir/slurmctld.pid-started" ] && ours "$(cat "$dir/slurmctld.pid-started")"; then
    die "a cluster already runs in $dir; stop it first ($0 stop $dir)"
  fi
  rm -rf "$dir"
  mkdir -p "$dir"/{munge,state,spool,log}
  # munged refuses a socket directory that others cannot traverse (0700, as
  # mktemp makes them) or can write.
  chmod 755 "$dir" "$dir/munge"
  mungekey --create --keyfile="$dir/munge/munge.key" > /dev/null
  chmod 600 "$dir/munge/munge.key"
  write_config

  say "starting munged, slurmctld and slurmd in $dir"
  start_daemon munged munged --foreground --force --socket="$dir/munge/munge.socket" \
      --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
      --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  for _ in $(seq 100); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$dir/munge/munge.socket" ] || { cat "$dir/log/munged.out" >&2; die "munged did not start"; }
  start_daemon slurmctld slurmctld -D -f "$conf"
  start_daemon slurmd slurmd -D -f "$conf" -N "$(hostname -s)"
  export SLURM_CONF=$conf
  local state=""
  for _ in $(seq 300); do
    state=$(sinfo -h -N -o %T 2>/dev/null | head -n 1 || true)
    [ "$state" = idle ] && break
    for d in slurmctld slurmd; do
      ours "$(cat "$dir/$d.pid-started")" ||
        { tail -n 20 "$dir/log/$d.log" "$dir/log/$d.out" >&2 2>/dev/null || true; stop_cluster;
          die "$d exited at start (logs in $dir/log)"; }
    done
    sleep 0.1
  done
  if [ "$state" != idle ]; then
    stop_cluster
    die "the node did not become idle within 30 s (state '${state}'; logs in $dir/log)"
  fi
  say "cluster up: partitions ondemand and spot on node $(hostname -s) ($(( $(nproc) * 4 )) slots on $(nproc) CPUs)"
  echo "export SLURM_CONF=$conf"
}

# Signals the daemons started from $dir, waits, then SIGKILLs what is left.
stop_daemons() {
  local pids=() pid
  for d in slurmd slurmctld munged; do
    pid=$(cat "$dir/$d.pid-started" 2>/dev/null || true)
    ours "$pid" && pids+=("$pid")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# slurmstepd processes (one per running job and step) of this cluster: they
# carry its SLURM_CONF in their environment.
stepds() {
  local pid
  for pid in $(pgrep -x slurmstepd || true); do
    { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$conf" &&
      echo "$pid"
  done
  return 0
}

stop_cluster() {
  export SLURM_CONF=$conf
  if [ -f "$dir/slurmctld.pid-started" ] && ours "$(cat "$dir/slurmctld.pid-started")"; then
    # Cancel jobs while slurmd still runs: job steps outlive slurmd.
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ -n "${jobs// /}" ]; then
      say "cancelling jobs: $jobs"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 300); do
        [ -z "$(squeue -h -o %A 2>/dev/null || true)" ] && [ -z "$(stepds)" ] && break
        sleep 0.1
      done
    fi
  fi
  stop_daemons
  local left
  left=$(stepds)
  if [ -n "$left" ]; then
    say "killing leftover slurmstepd: $left"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
  fi
}

case "$command" in
  start) start ;;
  stop)
    [ -d "$dir" ] || die "no cluster directory $dir"
    stop_cluster
    say "stopped the cluster in $dir"
    ;;
  status)
    [ -f "$conf" ] || die "no cluster in $dir (start one: $0 start $dir)"
    export SLURM_CONF=$conf
    sinfo
    squeue
    ;;
  env)
    [ -f "$conf" ] || die "no cluster in $dir (start one: $0 start $dir)"
    echo "export SLURM_CONF=$conf"
    ;;
  -h|--help) print_usage ;;
  "") usage_error "no command given" ;;
  *) usage_error "unknown command '$command'" ;;
esac
