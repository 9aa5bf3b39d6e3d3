#!/usr/bin/env bash
# Runs a test binary under QKV_ISA=LEVEL, or skips (exit 77) when this CPU or
# build cannot run the level (qkv info --cpu --isa LEVEL says why).
# usage: isa_caps.sh QKV LEVEL TEST_BINARY [ARGS...]
set -euo pipefail
qkv=$1 level=$2
shift 2
if ! why=$(env -u QKV_ISA "$qkv" info --cpu --isa "$level" 2>&1 >/dev/null); then
  echo "skipped: $why"
  exit 77
fi
QKV_ISA=$level exec "$@"
