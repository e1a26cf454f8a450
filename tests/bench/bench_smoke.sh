#!/usr/bin/env bash
# bench_smoke.sh REGEX COMMAND [ARGS...]: runs COMMAND and passes when its
# output ends in a line matching REGEX. The Bazel counterpart of CMake's
# PASS_REGULAR_EXPRESSION for bench_transport_smoke, which (like ctest) does
# not look at the exit status.
set -uo pipefail
regex="$1"
shift
out="$("$@" 2>&1)"
echo "bench_smoke: exit status $?"
printf '%s\n' "$out"
last="$(printf '%s\n' "$out" | tail -n 1)"
if ! [[ "$last" =~ $regex ]]; then
  echo "bench_smoke: the last line does not match: $regex" >&2
  exit 1
fi
