#!/usr/bin/env bash
# bench_flags_test.sh BENCH "BAD FLAGS" WANT...: a benchmark under
# --check_flags checks its flags and exits (0, or 2 naming every problem)
# without running anything.
set -uo pipefail
bench="$1"
bad_flags="$2"
shift 2
name="$(basename "$bench")"
fail() { echo "bench_flags_test: $name: $*" >&2; exit 1; }

out="$(timeout 30 "$bench" --check_flags 2>&1)"
status=$?
[ "$status" -eq 0 ] || fail "--check_flags exited $status (124: it ran the benchmark): $out"
[ -z "$out" ] || fail "--check_flags printed (it started the benchmark?): $out"

# shellcheck disable=SC2086  # The bad flags are words.
out="$(timeout 30 "$bench" --check_flags $bad_flags 2>&1)"
status=$?
[ "$status" -eq 2 ] || fail "$bad_flags exited $status, not 2: $out"
[[ "$out" == "$name: "* ]] || fail "the message does not start with '$name: ': $out"
for want in "$@"; do
  [[ "$out" == *"$want"* ]] || fail "no '$want' in: $out"
done
echo "bench_flags_test: $name: passed"
