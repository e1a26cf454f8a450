#!/usr/bin/env bash
# ops.SecureScrape: a real Prometheus server scrapes a shard whose metrics
# endpoint is behind TLS and bearer tokens, as docs/operations.md tells
# users to configure it.
#
#   tests/ops/secure_scrape_test.sh BIN_DIR
#
# openssl makes a CA and the shard's certificate; spotps-ps serves gRPC and
# --metrics_listen with it and with --auth_tokens. Prometheus scrapes it
# three ways: https with the CA and a reader's token (must be up, with the
# shard's series), https without a token, and plain http with the token
# (both must be down). A missing prometheus or openssl fails the test.
set -euo pipefail
source "$(dirname "$0")/../support/prometheus.sh"

bin=${1:?usage: secure_scrape_test.sh BIN_DIR}
say() { echo "[secure-scrape-test $(date +%T)] $*"; }
fail() { echo "[secure-scrape-test] FAIL: $*" >&2; exit 1; }
for b in prometheus openssl /usr/bin/python3; do
  command -v "$b" > /dev/null || fail "$b is missing: run deploy/install-deps.sh"
done
[ -x "$bin/spotps-ps" ] || fail "$bin/spotps-ps is not built"

work=$(mktemp -d "${TMPDIR:-/tmp}/spotps-secure-scrape-XXXXXX")
pids=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  if [ $status -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 15 "$f"; }; done >&2
  fi
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A CA and a certificate for 127.0.0.1 and localhost that it signed.
(
  cd "$work"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.pem -days 2 -subj /CN=test-ca -addext basicConstraints=critical,CA:TRUE
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout shard.key \
    -out shard.csr -subj /CN=shard
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > shard.ext
  openssl x509 -req -in shard.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out shard.pem \
    -days 2 -extfile shard.ext
  chmod 600 ./*.key
) > "$work/openssl.log" 2>&1 || fail "openssl could not make the certificates"
reader_token=metrics-r3ader-0b1c2d3e4f5a6b7c
printf '%s reader\nadm1n-token-9f8e7d6c5b4a3921 admin\n' "$reader_token" > "$work/tokens"
chmod 600 "$work/tokens"
printf '%s\n' "$reader_token" > "$work/reader.token"

"$bin/spotps-ps" --listen=127.0.0.1:0 --port_file="$work/shard.port" --shard_index=0 \
  --num_shards=1 --epochs=1 --units_per_epoch=10 --tls_cert="$work/shard.pem" \
  --tls_key="$work/shard.key" --auth_tokens="$work/tokens" --metrics_listen=127.0.0.1:0 \
  > "$work/shard.log" 2>&1 &
pids+=($!)
metrics_port=""
for _ in $(seq 300); do
  metrics_port=$(sed -n 's|.*metrics on https://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' \
    "$work/shard.log" | head -n 1)
  [ -n "$metrics_port" ] && break
  sleep 0.2
done
[ -n "$metrics_port" ] || fail "the shard never said it serves metrics over https"
say "shard serves metrics on https://127.0.0.1:$metrics_port"

target="static_configs: [{targets: ['127.0.0.1:$metrics_port']}]"
tls="tls_config: {ca_file: '$work/ca.pem'}"
token="authorization: {type: Bearer, credentials_file: '$work/reader.token'}"
cat > "$work/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - {job_name: secure, scheme: https, $tls, $token, $target}
  - {job_name: no-token, scheme: https, $tls, $target}
  - {job_name: plaintext, scheme: http, $token, $target}
EOF
start_prometheus "$work/prometheus.yml" "$work"
say "prometheus ready at $prom"

wait_query 'up{job="secure"}' 'v == 1' > /dev/null
partitions=$(wait_query 'spotps_shard_partitions{job="secure"}' 'v >= 0')
# The refused jobs have been scraped (and failed) by the time their up is 0.
wait_query 'up{job="no-token"}' 'v == 0' > /dev/null
wait_query 'up{job="plaintext"}' 'v == 0' > /dev/null
/usr/bin/python3 - "$prom" > "$work/targets.json" << 'PY'
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1] + "/api/v1/targets", timeout=10).read().decode())
PY
grep -q '401 Unauthorized' "$work/targets.json" ||
  fail "the scrape without a token did not fail with 401: $(cat "$work/targets.json")"
echo "secure_scrape: https+token=up https-no-token=down(401) http=down" \
  "spotps_shard_partitions=$partitions"
