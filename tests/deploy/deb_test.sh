#!/bin/bash
# The Debian package and what the container image is made of:
#
#   tests/deploy/deb_test.sh SOURCE_DIR BUILD_DIR VERSION
#
# Builds spotps_VERSION_amd64.deb with cpack from BUILD_DIR's CPack config
# into a scratch folder (the build tree only gets cmake's
# install_manifest.txt), then checks its Depends, its file list, that every
# binary unpacked with dpkg -x runs (--version prints VERSION) without any
# library from the build tree, that client/example_main.cc compiles and links
# against the unpacked headers, static libraries and pkg-config file alone,
# and that deploy/docker's entry point, run from the unpacked package, builds
# the command lines a container would run and the binaries accept them
# (--check_flags). Last, the Dockerfile's pieces are checked against the
# package: base image, the .deb it copies, the entry point's path, the user.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR VERSION" >&2; exit 2; }
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
version=$3
scratch=$(mktemp -d "${TMPDIR:-/tmp}/spotps-deb-test-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }

echo "== building the package in $scratch"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$scratch/out" > "$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log" >&2; die "cpack failed"; }
deb=$scratch/out/spotps_${version}_amd64.deb
[ -f "$deb" ] || die "cpack did not write $deb; it wrote: $(ls "$scratch/out")"
pass "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

echo "== control fields"
[ "$(dpkg-deb -f "$deb" Package)" = spotps ] || fail "Package is not spotps"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is not $version"
[ "$(dpkg-deb -f "$deb" Architecture)" = amd64 ] || fail "Architecture is not amd64"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# The Debian 12 runtime packages of the libraries the binaries link.
for p in libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libdnnl2 libtorch1.13 \
    libgomp1 libstdc++6 libc6; do
  # Whole package names only: libgrpc++1.51 must not match libgrpc++1.51-dev.
  if grep -Eq "(^|, )${p//+/\\+}( \\(|,|$)" <<< "$depends"; then
    pass "Depends names $p"
  else
    fail "Depends lacks $p"
  fi
done
if grep -Eq -- '-dev( |,|$)' <<< "$depends"; then fail "Depends names a -dev package"; fi
# Every package named must exist in Debian 12 (as installed here).
while read -r p; do
  dpkg-query -W "$p" > /dev/null 2>&1 || fail "Depends names $p, which is not installed here"
done < <(sed 's/([^)]*)//g; s/, */\n/g; s/ //g' <<< "$depends")

echo "== contents"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$scratch/files"
for f in /usr/bin/spotps-ps /usr/bin/spotps-trainer /usr/bin/spotps-trainer-core \
    /usr/bin/spotps-generate \
    /usr/bin/spotps-tokenize /usr/bin/spotps-ctl /usr/bin/spotps-client-example \
    /usr/lib/libspotps_client.a /usr/lib/libspotps_common.a /usr/lib/libspotps_proto.a \
    /usr/lib/pkgconfig/spotps.pc /usr/lib/cmake/spotps/spotpsConfig.cmake \
    /usr/lib/cmake/spotps/spotpsTargets.cmake /usr/include/spotps/client/safetensors_file.h \
    /usr/include/spotps/client/cluster.h /usr/include/spotps/client/coordinator_client.h \
    /usr/include/spotps/common/model_layout.h /usr/include/spotps/common/partition_map.h \
    /usr/include/spotps/common/retry_policy.h \
    /usr/include/spotps/spotps/v1/parameter_server.pb.h \
    /usr/include/spotps/spotps/v1/coordinator.pb.h \
    /usr/share/spotps/entrypoint.sh /usr/share/spotps/prepare_corpus.sh; do
  grep -qx "$f" "$scratch/files" || fail "package lacks $f"
done
# No test binary, benchmark or shared spotps library slips in.
if grep -E '_test$|bench|\.so' "$scratch/files"; then fail "package holds the files above"; fi
pass "$(grep -vc '/$' "$scratch/files") files"

echo "== unpacked binaries"
root=$scratch/root
dpkg -x "$deb" "$root"
for b in spotps-ps spotps-trainer spotps-generate spotps-tokenize spotps-ctl spotps-client-example; do
  out=$(env -u LD_LIBRARY_PATH "$root/usr/bin/$b" --version 2>&1) || fail "$b --version exited $?"
  [ "$out" = "$b $version" ] || fail "$b --version printed '$out', want '$b $version'"
  if ldd "$root/usr/bin/$b" | grep -E 'not found|spotps|/work/|build/'; then
    fail "$b links the libraries above"
  fi
done
pass "every binary prints its version $version"

echo "== client library from the package alone"
export PKG_CONFIG_PATH=$root/usr/lib/pkgconfig
[ "$(pkg-config --modversion spotps)" = "$version" ] || fail "pkg-config spotps version"
# shellcheck disable=SC2046
if g++ -std=c++17 -O0 -o "$scratch/example" "$src/client/example_main.cc" \
    $(pkg-config --cflags --libs spotps) -iquote /nonexistent 2> "$scratch/cc.log"; then
  grep -q -- '--ps' <("$scratch/example" --help 2>&1) || fail "the example built from the package lacks --ps"
  pass "client/example_main.cc builds against the package"
else
  cat "$scratch/cc.log" >&2
  fail "client/example_main.cc does not build against the package"
fi
# The headers must come from the package, not the source tree.
if pkg-config --cflags spotps | grep -q -- "$src"; then fail "pkg-config points into the sources"; fi

echo "== the container entry point, from the package"
entry=$root/usr/share/spotps/entrypoint.sh
bash -n "$entry" || fail "entrypoint.sh does not parse"
cmp -s "$entry" "$src/deploy/docker/entrypoint.sh" || fail "packaged entrypoint.sh differs from deploy/docker's"
# expect_exec NAME STATUS WANT... -- ENV... -- ARGS...: runs the entry point
# with the package's binaries and --check_flags; checks its exit status and
# that its "entrypoint: exec" line holds every WANT.
expect() {
  local name=$1 status=$2 want=() envs=() got line
  shift 2
  while [ "$1" != -- ]; do want+=("$1"); shift; done
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  set +e
  env -u SPOTPS_BIN_DIR -u SPOTPS_PS -u SPOTPS_SHARD0_ARGS -u SPOTPS_SHARD_INDEX \
      PATH=/usr/bin:/bin "${envs[@]}" "$entry" "$@" --check_flags > "$scratch/entry.log" 2>&1
  got=$?
  set -e
  if [ "$got" -ne "$status" ]; then
    cat "$scratch/entry.log" >&2
    fail "$name: exit status $got, want $status"
    return
  fi
  line=$(grep '^entrypoint: exec ' "$scratch/entry.log" || true)
  for w in "${want[@]}"; do
    grep -q -- " $w\( \|$\)" <<< "$line" || { cat "$scratch/entry.log" >&2; fail "$name: no '$w' in '$line'"; return; }
  done
  pass "$name"
}
ps3=spotps-ps-0.spotps-ps:7000,spotps-ps-1.spotps-ps:7000,spotps-ps-2.spotps-ps:7000
expect "shard 0 from hostname" 0 "$root/usr/bin/spotps-ps" --shard_index=0 --num_shards=3 \
    --peers=spotps-ps-1.spotps-ps:7000,spotps-ps-2.spotps-ps:7000 --epochs=2 --units_per_epoch=50 -- \
    SPOTPS_HOSTNAME=spotps-ps-0 SPOTPS_PS=$ps3 "SPOTPS_SHARD0_ARGS=--epochs=2 --units_per_epoch=50" -- \
    ps --listen=0.0.0.0:7000 --insecure --checkpoint_dir=/var/lib/spotps/checkpoints
expect "shard 2 from hostname" 0 --shard_index=2 --num_shards=3 -- \
    SPOTPS_HOSTNAME=spotps-ps-2 SPOTPS_PS=$ps3 "SPOTPS_SHARD0_ARGS=--epochs=2 --units_per_epoch=50" -- \
    ps --insecure --checkpoint_dir=/var/lib/spotps/checkpoints
if grep -q -- '--peers\|--epochs' "$scratch/entry.log"; then fail "shard 2 got shard 0's flags"; fi
expect "shard index from SPOTPS_SHARD_INDEX" 0 --shard_index=1 -- \
    SPOTPS_HOSTNAME=ip-10-0-0-5 SPOTPS_SHARD_INDEX=1 SPOTPS_PS=$ps3 -- ps --insecure
expect "hostname without ordinal" 2 -- SPOTPS_HOSTNAME=spotps-ps SPOTPS_PS=$ps3 -- ps
expect "ordinal beyond SPOTPS_PS" 2 -- SPOTPS_HOSTNAME=spotps-ps-3 SPOTPS_PS=$ps3 -- ps
expect "listen port not SPOTPS_PS's" 2 -- SPOTPS_HOSTNAME=spotps-ps-1 SPOTPS_PS=$ps3 -- \
    ps --listen=0.0.0.0:7001
expect "--num_shards against SPOTPS_PS" 2 -- SPOTPS_HOSTNAME=spotps-ps-1 SPOTPS_PS=$ps3 -- \
    ps --num_shards=2
expect "a flag spotps-ps refuses" 2 -- SPOTPS_HOSTNAME=spotps-ps-1 SPOTPS_PS=$ps3 -- \
    ps --optimizer=adam
expect "trainer" 0 "$root/usr/bin/spotps-trainer" "--ps=$ps3" --worker_index=7 -- \
    SPOTPS_HOSTNAME=trainer-7 SPOTPS_PS=$ps3 -- \
    trainer --data=/usr/share/spotps/corpus/kjv.tokens --spot_notice=aws
expect "trainer of a Deployment (no ordinal)" 0 "--ps=$ps3" -- \
    SPOTPS_HOSTNAME=spotps-trainer-5d9c7b8f6d-x2k4q SPOTPS_PS=$ps3 -- trainer --data=/d
grep -Eq -- ' --worker_index=[0-9]+( |$)' "$scratch/entry.log" || fail "no derived --worker_index"
expect "trainer with a bad flag" 2 -- SPOTPS_PS=$ps3 -- trainer --data=/d --dtype=fp16
expect "unknown command" 2 -- -- bogus

echo "== the Dockerfile against the package"
dockerfile=$src/deploy/docker/Dockerfile
# One instruction per line: continuation lines joined, comments dropped.
sed -e '/^[[:space:]]*#/d' "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' > "$scratch/instructions"
grep -qx 'ARG BASE=debian:12-slim' "$scratch/instructions" && grep -qx 'FROM ${BASE}' "$scratch/instructions" ||
  fail "Dockerfile is not FROM \${BASE} with BASE=debian:12-slim by default"
copy_glob=$(sed -n 's/^COPY \(spotps_[^ ]*\.deb\) .*/\1/p' "$scratch/instructions")
[ -n "$copy_glob" ] || fail "Dockerfile copies no spotps_*.deb"
# shellcheck disable=SC2053
[[ $(basename "$deb") == $copy_glob ]] || fail "COPY $copy_glob does not match $(basename "$deb")"
grep -q 'apt-get install .*/tmp/spotps_\*_amd64.deb' "$scratch/instructions" ||
  fail "the .deb is not installed with apt-get (which pulls its Depends)"
entrypoint_path=$(sed -n 's/^ENTRYPOINT \["\([^"]*\)".*/\1/p' "$scratch/instructions")
[ -x "$root$entrypoint_path" ] || fail "ENTRYPOINT $entrypoint_path is not in the package"
user=$(sed -n 's/^USER \([^:]*\).*/\1/p' "$scratch/instructions" | tail -n 1)
if [ -z "$user" ] || [ "$user" = 0 ] || [ "$user" = root ]; then fail "the image runs as root"; fi
n=0
while IFS= read -r body; do
  n=$((n + 1))
  bash -n <<< "$body" || fail "RUN instruction $n does not parse: $body"
  # Every /usr/share/spotps path a RUN uses must be in the package.
  while read -r p; do
    [ -x "$root$p" ] || fail "RUN uses $p, which the package lacks"
  done < <(grep -o '/usr/share/spotps/[a-z_]*\.sh' <<< "$body")
done < <(sed -n 's/^RUN //p' "$scratch/instructions")
[ "$n" -ge 2 ] || fail "found $n RUN instructions"
pass "Dockerfile: $n RUN instructions parse, ENTRYPOINT $entrypoint_path, USER $user"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all package checks passed"
