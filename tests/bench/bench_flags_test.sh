#!/usr/bin/env bash
# bench_flags_test.sh BENCH: spotps-bench-trainer under --check_flags checks
# its flags and exits (0, or 2 with the problem) without running anything.
set -uo pipefail
bench="$1"
fail() { echo "bench_flags_test: $*" >&2; exit 1; }

out="$(timeout 30 "$bench" --check_flags 2>&1)"
status=$?
[ "$status" -eq 0 ] || fail "--check_flags exited $status (124: it ran the benchmark): $out"
[ -z "$out" ] || fail "--check_flags printed (it started the benchmark?): $out"

out="$(timeout 30 "$bench" --check_flags --steps=0 --transfer_nice=20 2>&1)"
status=$?
[ "$status" -eq 2 ] || fail "bad flags exited $status, not 2: $out"
for want in "spotps-bench-trainer: --steps must be at least 1" \
            "--shard_nice and --transfer_nice must be in [0, 19]"; do
  [[ "$out" == *"$want"* ]] || fail "no '$want' in: $out"
done
echo "bench_flags_test: passed"
