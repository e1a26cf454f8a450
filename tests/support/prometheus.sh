# Sourced by the shell tests that scrape with a real Prometheus server
# (Debian `prometheus`). The test defines fail (prints its message and
# exits) and keeps pids (processes its cleanup stops).
#
#   start_prometheus CONFIG WORK_DIR   starts it on a free port, waits until
#                                      it is ready; sets $prom (its URL)
#   query PROMQL                       the value of the first sample, or ""
#   wait_query PROMQL CONDITION        polls until the awk CONDITION on v
#                                      holds (120 s); prints v

start_prometheus() {
  local config=$1 work=$2 port deadline
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  prometheus --config.file="$config" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$port" > "$work/prometheus.log" 2>&1 &
  pids+=($!)
  prom=http://127.0.0.1:$port
  deadline=$((SECONDS + 60))
  until /usr/bin/python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
      "$prom/-/ready" > /dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "prometheus not ready within 60 s"
    sleep 0.5
  done
}

query() {
  /usr/bin/python3 - "$prom" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
data = json.load(urllib.request.urlopen(url, timeout=10))
if data["status"] != "success":
    sys.exit("query failed: " + json.dumps(data))
result = data["data"]["result"]
print(result[0]["value"][1] if result else "")
PY
}

wait_query() {
  local deadline=$((SECONDS + 120)) v=""
  while [ $SECONDS -lt $deadline ]; do
    v=$(query "$1" || true)
    if [ -n "$v" ] && awk -v v="$v" "BEGIN { exit !($2) }"; then echo "$v"; return 0; fi
    sleep 1
  done
  fail "prometheus: '$1' = '$v', never $2 within 120 s"
}
