#!/bin/bash
# Builds the spotps container image from the project's Debian package:
#
#   deploy/docker/build.sh [--build_dir=build] [--deb=FILE] [--tag=spotps:VERSION]
#                          [--base=debian:12-slim | --local_base] [--engine=podman|docker]
#
# --build_dir   a configured and built CMake tree: its package is made with cpack
#               (ignored with --deb).
# --deb         use this spotps_<version>_amd64.deb instead of making one.
# --tag         the image's name; default spotps:<the package's version>, the tag
#               that deploy/k8s and deploy/aws run.
# --base        the Debian 12 image to build on (the Dockerfile's BASE).
# --local_base  build on a base made here, offline from the registries: mmdebstrap
#               writes a minbase bookworm root file system from apt's own mirror
#               with the package's dependencies already in, and the engine imports
#               it as localhost/spotps-base:bookworm-<hash of the package list>. A
#               base with that tag is reused, so rebuilding spotps fetches only
#               the package lists.
# --engine      podman (default when installed) or docker.
#
# The last line reads "build.sh: built TAG (SIZE MB) in N s". Hosts where the
# engine needs extra settings (podman with runc and cgroupfs, fixed ulimits)
# take them from containers.conf (CONTAINERS_CONF): see docs/deploy.md.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=$src/build
deb=""
tag=""
base=debian:12-slim
local_base=false
engine=""
usage_error() {
  echo "build.sh: $*" >&2
  sed -n '4,5p' "$0" | sed 's/^# \{0,1\}/usage: /' >&2
  exit 2
}
for arg in "$@"; do
  case "$arg" in
    --build_dir=*) build_dir=${arg#*=} ;;
    --deb=*) deb=${arg#*=} ;;
    --tag=*) tag=${arg#*=} ;;
    --base=*) base=${arg#*=} ;;
    --local_base) local_base=true ;;
    --engine=*) engine=${arg#*=} ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$arg'" ;;
  esac
done
if [ -z "$engine" ]; then
  if command -v podman > /dev/null; then engine=podman; else engine=docker; fi
fi
case "$engine" in podman|docker) ;; *) usage_error "--engine must be podman or docker" ;; esac
command -v "$engine" > /dev/null ||
  usage_error "$engine is not installed (deploy/install-deps.sh installs podman)"

start_s=$SECONDS
context=$(mktemp -d "${TMPDIR:-/tmp}/spotps-image-XXXXXX")
trap 'rm -rf "$context"' EXIT

# The package: given, or made from the build tree.
if [ -z "$deb" ]; then
  [ -f "$build_dir/CPackConfig.cmake" ] ||
    usage_error "$build_dir has no CPackConfig.cmake: configure and build it, or pass --deb"
  echo "build.sh: packaging $build_dir with cpack"
  cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$context/cpack" > "$context/cpack.log" 2>&1 ||
    { cat "$context/cpack.log" >&2; echo "build.sh: cpack failed" >&2; exit 1; }
  deb=$(ls "$context"/cpack/spotps_*_amd64.deb)
fi
[ -f "$deb" ] || usage_error "no package at $deb"
version=$(dpkg-deb -f "$deb" Version)
tag=${tag:-spotps:$version}
cp "$deb" "$context/"
cp "$src/deploy/docker/Dockerfile" "$context/"

# The local base: bookworm minbase plus the package's Depends and
# Recommends, from the mirror apt already uses.
make_local_base() {
  local packages mirror name
  command -v mmdebstrap > /dev/null ||
    usage_error "--local_base needs mmdebstrap (deploy/install-deps.sh installs it)"
  packages=$( { dpkg-deb -f "$deb" Depends; echo ,; dpkg-deb -f "$deb" Recommends; } |
    tr ',' '\n' | sed 's/([^)]*)//; s/|.*//; s/ //g' | grep -v '^$' | sort -u | paste -sd, -)
  name=localhost/spotps-base:bookworm-$(echo "$packages" | sha256sum | cut -c1-12)
  if "$engine" image inspect "$name" > /dev/null 2>&1; then
    echo "build.sh: reusing the base $name" >&2
  else
    mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Codename: bookworm' 'Created-By: Packages' \
      2> /dev/null | head -n 1)
    mirror=${mirror:-http://deb.debian.org/debian/}
    echo "build.sh: making the base $name from $mirror (mmdebstrap)" >&2
    mmdebstrap --variant=minbase --include="$packages" bookworm "$context/rootfs.tar" "$mirror" \
      > "$context/mmdebstrap.log" 2>&1 ||
      { tail -n 20 "$context/mmdebstrap.log" >&2; echo "build.sh: mmdebstrap failed" >&2; exit 1; }
    "$engine" import "$context/rootfs.tar" "$name" > /dev/null
    rm -f "$context/rootfs.tar"
  fi
  echo "$name"
}
if $local_base; then base=$(make_local_base); fi

echo "build.sh: building $tag on $base with $engine"
"$engine" build --network=host --build-arg "BASE=$base" -t "$tag" "$context"
size=$("$engine" image inspect --format '{{.Size}}' "$tag")
echo "build.sh: built $tag ($((size / 1000000)) MB) in $((SECONDS - start_s)) s"
