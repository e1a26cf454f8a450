#!/usr/bin/env bash
# The test command: installs every dependency (Debian packages, as root),
# configures and builds into build/, runs the whole ctest suite, then builds
# everything again with Bazel and runs its tests but the slow whole-job ones
# (which ctest has just run).
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
# Lets ccache reuse objects across clones in different folders.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
(cd build && ctest --output-on-failure --timeout 600 "$@")

# Bazel keeps its output base and its cache under build/, so a fresh clone is
# self-contained and git sees nothing new; its server stops when this ends.
bazel_cmd=(bazel --output_user_root="$PWD/build/bazel-root" --max_idle_secs=300)
trap '"${bazel_cmd[@]}" shutdown >/dev/null 2>&1 || true' EXIT
bazel_flags=(--jobs=2 --disk_cache="$PWD/build/bazel-cache")
"${bazel_cmd[@]}" build "${bazel_flags[@]}" //...
"${bazel_cmd[@]}" test "${bazel_flags[@]}" --test_tag_filters=-slow //...

# The fuzzers: a clang build of the decoders of untrusted bytes with
# libFuzzer and the address/undefined sanitizers, each run for a bounded time
# from the seed corpus in tests/fuzz/corpus.
CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DSPOTPS_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build/fuzz -j"$(nproc)"
(cd build/fuzz && ctest --output-on-failure)
