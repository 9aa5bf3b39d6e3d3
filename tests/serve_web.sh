#!/usr/bin/env bash
# qkv serve's chat page at / in headless Chromium, driven by playwright-core
# (npm, installed once into CACHE_DIR). Skips (exit 77, with a message) without
# chromium, node/npm, the registry or the shared model. The model is
# tinystories-3M (a few hundred tokens/s): stories260K can finish a reply
# before the page reads twice, which shows no partial states.
# Usage: serve_web.sh QKV SHARED_DIR CACHE_DIR OUTPUT_DIR
set -u
QKV="$1" MODEL="$2/models/tinystories-3M-F32.gguf" CACHE="$3" OUT="$4"
[ -f "$MODEL" ] || { echo "SKIPPED: $MODEL is absent"; exit 77; }
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
  { echo "SKIPPED: chromium is not installed (scripts/setup.sh --tests installs it)"; exit 77; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 77; }
PACKAGE=playwright-core@1.65.1
stamp="$CACHE/installed-${PACKAGE//[@\/]/_}"
if [ ! -f "$stamp" ]; then
  mkdir -p "$CACHE"
  [ -f "$CACHE/package.json" ] || echo '{"private": true}' > "$CACHE/package.json"
  (cd "$CACHE" && timeout 180 npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$PACKAGE") ||
    { echo "SKIPPED: npm could not install $PACKAGE"; exit 77; }
  touch "$stamp"
fi
mkdir -p "$OUT"
source "$(dirname "$0")/serve_lib.sh"
start_server A "$QKV" -m "$MODEL" --slots 2 -c 512 --kv-type f32 -t 1 || exit 1
NODE_PATH="$CACHE/node_modules" timeout 120 node "$(dirname "$0")/serve_web.mjs" "http://127.0.0.1:$A_PORT" \
  "$CHROMIUM" "$OUT/serve_web.png"
rc=$?
stop_server "$A_PID"
[ "$STOP_RC" == 0 ] || { echo "FAIL: the server exited with $STOP_RC"; rc=1; }
exit $rc
