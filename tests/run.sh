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
cd build
ctest --output-on-failure --timeout 600 "$@"
