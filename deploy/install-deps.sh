#!/usr/bin/env bash
# Installs every Debian package spotps needs to build, test and run.
# Idempotent: packages already present are skipped without touching apt's lists.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers libopenblas0-pthread
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libabsl-dev libboost-dev libboost-system-dev libgtest-dev libgmock-dev
  bazel-bootstrap python3
  bible-kjv bible-kjv-text
  # The fuzzers (tests/fuzz): clang with libFuzzer and its OpenMP.
  clang libclang-rt-14-dev libomp-dev
  # Deployment tests: dpkg-shlibdeps (the .deb's Depends), YAML parsing.
  dpkg-dev python3-yaml
  # Slurm and multi-host tests: a one-node cluster, JSON, network namespaces.
  slurm-wlm munge jq iproute2
  # spotps-bench-trainer's PyTorch eager baseline (tests/bench/torch_baseline.py).
  python3-torch
)

# kubectl renders the Kubernetes manifests (kubectl kustomize) in the
# deployment tests; Debian's is kubernetes-client. A kubectl installed some
# other way (e.g. the Google Cloud SDK's) does as well.
if ! command -v kubectl > /dev/null 2>&1; then
  PACKAGES+=(kubernetes-client)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[deps] all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "[deps] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "[deps] done"
