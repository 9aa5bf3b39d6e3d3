#!/usr/bin/env bash
# Schema-constrained output of qkv serve checked with ajv (serve_schema.mjs).
# Installs ajv, ajv-formats, openai and zod into a cache under the build tree
# (skips when npm or the registry is unavailable), starts a server with four
# slots and room in the context for long constrained outputs, runs the script.
set -u
QKV="$1"
MODEL="$2/models/stories260K.gguf"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
if [ ! -f "$MODEL" ]; then echo "SKIPPED: $MODEL is absent"; exit 0; fi
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="ajv@8 ajv-formats@3 openai@4 zod@3"
missing=0
for p in ajv ajv-formats openai zod; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
# --slots 4 matches the script's four requests at a time; -c 2048 holds the
# prompt and max_tokens 1500.
start_server A "$QKV" -m "$MODEL" --slots 4 -c 2048 --kv-type f32 -t 2 || exit 1
NODE_PATH="$CACHE/node_modules" timeout 400 node "$(dirname "$0")/serve_schema.mjs" "http://127.0.0.1:$A_PORT/v1"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_schema.mjs did not finish in 400 s"
stop_server "$A_PID"
[ "$STOP_RC" == 0 ] || { echo "FAIL: the server exited with $STOP_RC"; rc=1; }
exit $rc
