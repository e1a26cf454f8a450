# Shell functions shared by up.sh and scale.sh (sourced, not run).

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
