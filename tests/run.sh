#!/usr/bin/env bash
# The test command: installs every dependency (Debian packages, as root),
# configures and builds into build/, and runs the whole ctest suite.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
# Lets ccache reuse objects across clones in different folders.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
(cd build && ctest --output-on-failure --timeout 600 "$@")

# The fuzzers: a clang build of the decoders of untrusted bytes with
# libFuzzer and the address/undefined sanitizers, each run for a bounded time
# from the seed corpus in tests/fuzz/corpus.
CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DSPOTPS_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build/fuzz -j"$(nproc)"
(cd build/fuzz && ctest --output-on-failure)
