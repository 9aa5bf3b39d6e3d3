#!/usr/bin/env bash
# Runs a Node test of qkv serve (serve_load.mjs, serve_faults*.mjs): skips
# without node or the shared model; the script bounds its own time.
set -u
SCRIPT="$1"; QKV="$2"; MODEL="$3/models/stories260K.gguf"
[ -f "$MODEL" ] || { echo "SKIPPED: $MODEL is absent"; exit 0; }
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 0; }
exec timeout 240 node "$(dirname "$0")/$SCRIPT" "$QKV" "$MODEL"
