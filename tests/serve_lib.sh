#!/usr/bin/env bash
# Shared by the qkv serve tests: start a server on 127.0.0.1 and a free port,
# wait (bounded) until /health answers, and always stop it on exit.
# Usage: source serve_lib.sh; start_server NAME QKV ARGS...; then $PORT_NAME / $PID_NAME.
SERVE_PIDS=()
SERVE_TMP=$(mktemp -d)
cleanup_servers() {
  for p in "${SERVE_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$SERVE_TMP"
}
trap cleanup_servers EXIT

# start_server NAME QKV [serve flags...]: sets PORT and PID (and ${NAME}_PORT, ${NAME}_PID).
start_server() {
  local name="$1" qkv="$2"
  shift 2
  # Idle OpenMP threads sleep: CTest runs suites side by side, and spinning
  # threads on oversubscribed cores slowed requests past a minute.
  OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$qkv" serve --host 127.0.0.1 --port 0 "$@" 2>"$SERVE_TMP/$name.err" &
  PID=$!
  SERVE_PIDS+=("$PID")
  PORT=""
  for _ in $(seq 1 200); do  # up to 20 s for the model to load
    PORT=$(grep -o 'listening on http://[^ ]*' "$SERVE_TMP/$name.err" 2>/dev/null | sed 's/.*://')
    [ -n "$PORT" ] && curl -s -m 2 "http://127.0.0.1:$PORT/health" | grep -q ok && break
    kill -0 "$PID" 2>/dev/null || { echo "FAIL: server $name exited:"; cat "$SERVE_TMP/$name.err"; return 1; }
    sleep 0.1
  done
  [ -n "$PORT" ] || { echo "FAIL: server $name did not start"; cat "$SERVE_TMP/$name.err"; return 1; }
  printf -v "${name}_PORT" '%s' "$PORT"
  printf -v "${name}_PID" '%s' "$PID"
}

# stop_server PID: SIGTERM, then wait up to 60 s; sets STOP_RC to the exit status ("killed" if it hung).
stop_server() {
  local pid="$1"
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    STOP_RC=killed
    return
  fi
  wait "$pid"
  STOP_RC=$?
}
