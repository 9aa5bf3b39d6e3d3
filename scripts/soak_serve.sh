#!/usr/bin/env bash
# Soak of qkv serve (not in CI): MINUTES of mixed load (scripts/soak_serve_load.mjs:
# completions and chat, streaming and not, bad bodies, dropped streams) with the
# server's memory sampled every SAMPLE_S seconds from /proc/PID/status: VmRSS and
# its two parts, RssAnon (heap, stacks, buffers: what a leak grows) and RssFile
# (pages of the binary, its libraries and the mmap'd model, read in as code
# paths and tensors are first touched, and clean: the kernel can drop them).
# Prints the table and whether RssAnon after the warm-up (the first sample)
# stays within TOLERANCE_PCT of the first post-warm-up sample, with VmRSS's
# growth beside it. Exit 0 flat, 1 grown, 2 the server died.
#   scripts/soak_serve.sh [MINUTES] [MODEL]   (30, ../shared/models/stories260K.gguf)
#   env: QKV (build/tools/qkv), SLOTS (4), WIDTH clients (8), SAMPLE_S (60), TOLERANCE_PCT (5),
#        SERVE_ARGS (more qkv serve flags, e.g. "--prefill-chunk 16")
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
model=${2:-../shared/models/stories260K.gguf}
qkv=${QKV:-build/tools/qkv}
sample_s=${SAMPLE_S:-60}
tolerance=${TOLERANCE_PCT:-5}
[ -x "$qkv" ] || { echo "soak: $qkv is not built (cmake --build build --target qkv)" >&2; exit 2; }
[ -f "$model" ] || { echo "soak: model $model is absent" >&2; exit 2; }
command -v node >/dev/null || { echo "soak: node is not installed" >&2; exit 2; }

tmp=$(mktemp -d)
server_pid="" load_pid=""
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

OMP_WAIT_POLICY=passive "$qkv" serve -m "$model" --host 127.0.0.1 --port 0 --slots "${SLOTS:-4}" \
  --max-queue 64 -c 512 -t 2 --max-body 65536 ${SERVE_ARGS:-} 2>"$tmp/server.log" &
server_pid=$!
port=""
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/server.log")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; exit 2; }
  sleep 0.1
done
[ -n "$port" ] || { echo "soak: the server did not start" >&2; exit 2; }

# Warm-up: one prompt of each length in steps of 8 words up to the context,
# so that every prefill GEMM shape (rows rounded to 16: kernels/gemm_onednn.cc)
# has been built once: oneDNN's primitives, cached by shape, are the server's
# largest lasting allocations, and the mixed load alone meets the rarer
# lengths (several prompts in one pass) over many minutes.
for n in $(seq 8 8 440); do
  words=$(printf 'a %.0s' $(seq "$n"))
  curl -s -o /dev/null "http://127.0.0.1:$port/v1/completions" -d "{\"prompt\": \"$words\", \"max_tokens\": 1}"
done
node scripts/soak_serve_load.mjs "$port" "${WIDTH:-8}" >"$tmp/load.json" &
load_pid=$!

# "VmRSS RssAnon RssFile" in KiB.
memory_kb() { awk '/^(VmRSS|RssAnon|RssFile):/ {v[$1] = $2} END {print v["VmRSS:"], v["RssAnon:"], v["RssFile:"]}' \
  "/proc/$server_pid/status"; }
requests() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^qkv_requests_total/ {n += $2} END {print n + 0}'; }
samples=() anon=()
printf '%8s %10s %10s %10s %10s\n' "elapsed" "VmRSS KiB" "RssAnon" "RssFile" "requests"
read -r r a f <<<"$(memory_kb)"
printf '%8s %10s %10s %10s %10s\n' "0 s" "$r" "$a" "$f" "$(requests)"
end=$(( $(date +%s) + minutes * 60 ))
t0=$(date +%s)
while [ "$(date +%s)" -lt "$end" ]; do
  sleep "$sample_s"
  kill -0 "$server_pid" 2>/dev/null || { echo "soak: the server died" >&2; tail -20 "$tmp/server.log" >&2; exit 2; }
  read -r r a f <<<"$(memory_kb)"
  samples+=("$r")
  anon+=("$a")
  printf '%8s %10s %10s %10s %10s\n' "$(( $(date +%s) - t0 )) s" "$r" "$a" "$f" "$(requests)"
done

kill -TERM "$load_pid"
wait "$load_pid" || true
load_pid=""
echo "load: $(cat "$tmp/load.json")"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
echo "server exit: $rc"

if [ "${#samples[@]}" -lt 2 ]; then
  echo "verdict: too few samples (${#samples[@]}) for a warm-up and a trend"
  exit 2
fi
# Growth of the peak after the warm-up over the first post-warm-up sample, in %.
growth() {
  local base=$1 max=$1 v
  shift
  for v in "$@"; do [ "$v" -gt "$max" ] && max=$v; done
  awk -v a="$base" -v b="$max" 'BEGIN {printf "%d %d %.2f", a, b, (b - a) * 100 / a}'
}
read -r abase amax agrowth <<<"$(growth "${anon[@]:1}")"
read -r rbase rmax rgrowth <<<"$(growth "${samples[@]:1}")"
summary="RssAnon ${abase} KiB, peak ${amax} KiB (+${agrowth}%); VmRSS ${rbase} KiB, peak ${rmax} KiB (+${rgrowth}%)"
if awk -v g="$agrowth" -v t="$tolerance" 'BEGIN {exit !(g <= t)}'; then
  echo "verdict: flat: after warm-up ${summary}: RssAnon within ${tolerance}%"
  [ "$rc" -eq 0 ] || exit 2
else
  echo "verdict: grown: after warm-up ${summary}: RssAnon beyond ${tolerance}%"
  exit 1
fi
