#!/usr/bin/env bash
# deploy/nginx in front of two qkv serve replicas on loopback: requests spread
# over both (least_conn), and survive one replica being killed (passive checks).
set -u
QKV="$1"
MODEL="$2/models/stories260K.gguf"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[ -f "$MODEL" ] || { echo "SKIPPED: $MODEL is absent"; exit 0; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "SKIPPED: nginx is not installed (Debian package nginx)"; exit 0; }
source "$(dirname "$0")/serve_lib.sh"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

start_server R1 "$QKV" -m "$MODEL" --slots 2 -c 256 -t 1 || exit 1
start_server R2 "$QKV" -m "$MODEL" --slots 2 -c 256 -t 1 || exit 1
LB_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
P="$SERVE_TMP/nginx"
mkdir -p "$P"
UP="server 127.0.0.1:$R1_PORT max_fails=1 fail_timeout=10s; server 127.0.0.1:$R2_PORT max_fails=1 fail_timeout=10s;"
sed -e "s|\${UPSTREAMS}|$UP|" -e "s|\${LISTEN}|127.0.0.1:$LB_PORT|" "$ROOT/deploy/nginx/qkv.conf.template" >"$P/qkv.conf"
sed -e "s|\${PREFIX}|$P|g" "$ROOT/deploy/nginx/nginx.conf.template" >"$P/nginx.conf"
"$NGINX" -p "$P" -c "$P/nginx.conf" -e "$P/error.log" &
NGINX_PID=$!
SERVE_PIDS+=("$NGINX_PID")
for _ in $(seq 1 50); do curl -s -m 1 "http://127.0.0.1:$LB_PORT/health" | grep -q ok && break; sleep 0.1; done
LB="http://127.0.0.1:$LB_PORT"

served() {  # completions a replica answered with 200
  curl -s -m 5 "http://127.0.0.1:$1/metrics" | sed -n 's/^qkv_requests_total{endpoint="\/v1\/completions",status="200"} //p'
}
body='{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true}'
# 16 requests, 4 at a time.
for round in 1 2 3 4; do
  for i in 1 2 3 4; do
    curl -s -N -m 30 "$LB/v1/completions" -d "$body" >"$SERVE_TMP/lb$round$i.txt" &
  done
  wait $(jobs -p | grep -v -x -F "$(printf '%s\n' "${SERVE_PIDS[@]}")")
done
ok=0
for f in "$SERVE_TMP"/lb*.txt; do tail -c 20 "$f" | grep -q '\[DONE\]' && ok=$((ok + 1)); done
a=$(served "$R1_PORT"); b=$(served "$R2_PORT")
echo "through nginx: $ok/16 streams complete; replica 1 served ${a:-0}, replica 2 ${b:-0}"
[ "$ok" == 16 ] || bad "not every stream completed through nginx"
[ "${a:-0}" -ge 3 ] && [ "${b:-0}" -ge 3 ] || bad "requests did not spread over both replicas"

# Kill replica 1 outright; every request still succeeds through replica 2.
kill -KILL "$R1_PID"
wait "$R1_PID" 2>/dev/null
ok=0
for i in $(seq 1 10); do
  s=$(curl -s -m 30 -o "$SERVE_TMP/after$i.json" -w '%{http_code}' "$LB/v1/completions" \
    -d '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}')
  [ "$s" == 200 ] && grep -q '"finish_reason"' "$SERVE_TMP/after$i.json" && ok=$((ok + 1))
done
echo "after killing replica 1: $ok/10 requests served"
[ "$ok" == 10 ] || bad "requests failed after a replica was killed"
kill -TERM "$NGINX_PID"
stop_server "$R2_PID"
[ "$STOP_RC" == 0 ] || bad "replica 2 exit status $STOP_RC"
[ $fail == 0 ] && echo "serve nginx: ok"
exit $fail
