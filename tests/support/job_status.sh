# Sourced by the shell job tests: waiting on a running job's coordinator.
# The test defines status_json (prints `spotps-ctl status --json`) and
# fail (prints its message and exits).
#
#   committed                  units committed so far, over every epoch
#   wait_committed N LIMIT_S   waits until N units are committed, else fails

committed() { status_json | jq '[.coordinator.epochs[].committed] | add // 0'; }

wait_committed() {
  local want=$1 limit=$2 c=0
  for _ in $(seq $((limit * 4))); do
    c=$(committed || echo 0)
    [ "$c" -ge "$want" ] && return 0
    sleep 0.25
  done
  fail "only $c units committed after ${limit} s (wanted $want)"
}
