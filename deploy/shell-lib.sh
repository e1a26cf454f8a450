# Shell functions shared by the deploy/ scripts (sourced, not run).

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
