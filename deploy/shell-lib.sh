# Shell functions shared by the deploy/ scripts (sourced, not run).

# install_and_build TARGET...: installs the dependencies (deploy/install-deps.sh)
# and builds TARGETs in build/ (Release); run from the repository root. The
# configure log goes to .cache/configure.log and is shown if it fails.
install_and_build() {
  say "installing dependencies"
  deploy/install-deps.sh
  say "building"
  mkdir -p .cache
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > .cache/configure.log 2>&1 ||
    { cat .cache/configure.log; exit 1; }
  cmake --build build -j"$(nproc)" --target "$@"
}

# wait_for_exit SECONDS PID...: waits until every PID has exited, at most
# SECONDS; returns 0 if they all did.
wait_for_exit() {
  local deadline=$((SECONDS + $1)) pid alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}

# stop_processes SECONDS PID...: SIGTERM, then SIGKILL for whatever is left
# after SECONDS.
stop_processes() {
  local grace=$1
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  wait_for_exit "$grace" "$@" || kill -KILL "$@" 2>/dev/null || true
}

# count_arg [N]: sets `count` to N, a positive integer, 1 if not given;
# otherwise calls the sourcing script's usage_error.
count_arg() {
  local n=${1:-1}
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage_error "N must be a positive integer, got '$n'"
  count=$n
}

# wait_for_child PID: waits for a background child of this shell to end and
# returns the child's own exit status. A trapped signal ends `wait` early
# with 128+signal while the child runs on (it drains), so this waits again
# until the child is gone; if the last wait was such an interruption, the
# status bash kept for the child replaces it.
wait_for_child() {
  local pid=$1 status=0 kept=0
  while :; do
    wait "$pid" && status=0 || status=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  if [ "$status" -gt 128 ]; then
    wait "$pid" 2>/dev/null && kept=0 || kept=$?
    [ "$kept" -ne 127 ] && status=$kept
  fi
  return "$status"
}

# start_local_shards BIN DIR N FLAG... [-- SHARD0_FLAG...]: starts N spotps-ps
# processes on free loopback ports, shards 1..N-1 first, then shard 0 with
# --peers naming them and the flags after `--`. "{i}" in a flag becomes the
# shard's index (--checkpoint_dir=DIR/shard{i}). Logs go to DIR/shard<i>.log
# (appended), ports to DIR/shard<i>.port. Appends the pids to the caller's
# `shard_pids` array and sets `shard_addresses` (shard order); returns 1,
# with the log on stderr, if a shard does not come up within 30 s.
start_local_shards() {
  local bin=$1 dir=$2 n=$3 i peers="" all=() zero=() flags
  shift 3
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do all+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  zero=("$@")
  rm -f "$dir"/shard*.port
  for i in $(seq 1 $((n - 1))) 0; do
    flags=("${all[@]//\{i\}/$i}")
    [ "$i" -eq 0 ] && flags+=("${zero[@]}" --peers="$peers")
    "$bin/spotps-ps" --listen=127.0.0.1:0 --port_file="$dir/shard$i.port" --shard_index="$i" \
        --num_shards="$n" "${flags[@]}" >> "$dir/shard$i.log" 2>&1 &
    shard_pids+=($!)
    for _ in $(seq 300); do [ -s "$dir/shard$i.port" ] && break; sleep 0.1; done
    [ -s "$dir/shard$i.port" ] || { tail -n 20 "$dir/shard$i.log" >&2; return 1; }
    [ "$i" -eq 0 ] || peers+="${peers:+,}127.0.0.1:$(cat "$dir/shard$i.port")"
  done
  shard_addresses="127.0.0.1:$(cat "$dir/shard0.port")${peers:+,$peers}"
}
