#!/bin/bash
# The installed client library, used the way another service would:
#
#   tests/client/install_consumer_test.sh SOURCE_DIR BUILD_DIR
#
# `cmake --install` of BUILD_DIR into a scratch prefix, then the example
# project client/examples/consumer configured and built out of tree against
# that prefix alone, twice: with find_package(spotps CONFIG) (spotps::client)
# and with pkg-config (spotps.pc). A spotps-ps from the prefix is started on a
# free port, given a small GPT-2 through spotps-ctl import (a file written by
# numpy, every value known), and both consumers must print its layout and
# the values of wpe.weight. The last line is the consumer's output.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/spotps-install-test-XXXXXX")
shard_pid=
cleanup() {
  if [ -n "$shard_pid" ]; then kill "$shard_pid" 2>/dev/null || true; wait "$shard_pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

prefix=$scratch/prefix
echo "== cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" > "$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; die "cmake --install failed"; }
for f in lib/cmake/spotps/spotpsConfig.cmake lib/cmake/spotps/spotpsConfigVersion.cmake \
    lib/cmake/spotps/spotpsTargets.cmake lib/pkgconfig/spotps.pc lib/libspotps_client.a \
    include/spotps/client/cluster.h include/spotps/client/safetensors_file.h \
    include/spotps/client/hf_gpt2_names.h include/spotps/spotps/v1/parameter_server.pb.h \
    bin/spotps-ps bin/spotps-ctl; do
  [ -e "$prefix/$f" ] || die "the install lacks $f"
done
if grep -rq -- "$src\|$build" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  die "the installed package files point into the source or build tree"
fi
echo "ok: headers, static libraries, spotpsConfig.cmake, spotps.pc"

# Out of tree: a copy of the example, nothing of the source tree on the
# include path. ccache (if present) with paths relative to the scratch
# folder, so a second run reuses the first one's objects.
cp -r "$src/client/examples/consumer" "$scratch/consumer-src"
launcher=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR=$scratch
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
configure_and_build() {  # NAME CMAKE_ARGS...
  local name=$1
  shift
  if ! cmake -S "$scratch/consumer-src" -B "$scratch/$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      "$@" > "$scratch/$name.log" 2>&1 || ! cmake --build "$scratch/$name" >> "$scratch/$name.log" 2>&1; then
    cat "$scratch/$name.log" >&2
    die "the consumer does not build with $name"
  fi
  if grep -q -- "$src" "$scratch/$name/build.ninja"; then die "$name: the build uses the source tree"; fi
  echo "ok: the consumer builds with $name"
}
configure_and_build find_package -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig configure_and_build pkg-config \
  -DSPOTPS_CONSUMER_USE_PKG_CONFIG=ON "${launcher[@]}"
grep -q 'spotps::client' "$scratch/consumer-src/CMakeLists.txt" || die "the example does not link spotps::client"

echo "== a live shard from the install"
"$prefix/bin/spotps-ps" --listen=127.0.0.1:0 --port_file="$scratch/port" --shard_index=0 \
  --num_shards=1 > "$scratch/shard.log" 2>&1 &
shard_pid=$!
for _ in $(seq 300); do [ -s "$scratch/port" ] && break; sleep 0.1; done
[ -s "$scratch/port" ] || { cat "$scratch/shard.log" >&2; die "the shard wrote no port"; }
ps_addr=127.0.0.1:$(cat "$scratch/port")
/usr/bin/python3 "$src/tests/client/write_gpt2_safetensors.py" "$scratch/gpt2.safetensors" \
  --n_layer=2 --d_model=8 --vocab=11 --context=5
"$prefix/bin/spotps-ctl" --ps="$ps_addr" import --in="$scratch/gpt2.safetensors"

# wpe.weight is the writer's tensor 1: its element i holds 10000 + i.
for name in find_package pkg-config; do
  out=$("$scratch/$name/spotps-consumer" "$ps_addr" 2>&1) || { echo "$out" >&2; die "$name consumer failed"; }
  echo "$out"
  grep -q '^consumer: shards=1 global_step=0$' <<< "$out" || die "$name: no shard line"
  grep -q '^consumer: model 28 tensors, 1888 elements' <<< "$out" || die "$name: wrong model"
  grep -q '^consumer: wpe.weight (Hugging Face transformer.wpe.weight) = 10000 10001 10002 10003$' \
    <<< "$out" || die "$name: wrong wpe.weight values"
done
echo "all install checks passed"
