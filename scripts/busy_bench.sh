#!/usr/bin/env bash
# qkv's speed on a busy machine: prefill, decode and 16-sequence rows at the
# default thread count and at -t 1, first idle, then with N CPU-bound
# competitors pinned one per core (started and stopped here), and optionally
# llama.cpp's llama-bench / llama-batched-bench beside it under the same load.
#
#   scripts/busy_bench.sh -m MODEL [--competitors N] [--prompt 512] [--reps 3]
#       [--qkv build/tools/qkv] [--peer PATH/llama-bench] [--peer-batched PATH/llama-batched-bench]
#       [--no-idle] [-- extra qkv bench flags]
#
# Prints one table, tokens/s: a row per load and test, a column per program
# and thread count. The floor it checks (issue "steady"): under load, the
# default thread count is at least as fast as -t 1.
set -euo pipefail

qkv=build/tools/qkv
model=
competitors=$(nproc)
prompt=512
reps=3
peer=
peer_batched=
idle=1
extra=()
while (($#)); do
  case "$1" in
    -m) model=$2; shift 2 ;;
    --competitors) competitors=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --qkv) qkv=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --peer-batched) peer_batched=$2; shift 2 ;;
    --no-idle) idle=0; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "busy_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $model && -f $model ]] || { echo "busy_bench.sh: -m MODEL names no file ('$model')" >&2; exit 2; }
[[ $competitors =~ ^[0-9]+$ ]] || { echo "busy_bench.sh: --competitors takes a count, got '$competitors'" >&2; exit 2; }
[[ -x $qkv ]] || { echo "busy_bench.sh: no qkv binary at '$qkv' (--qkv PATH)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "busy_bench.sh: needs taskset (util-linux)" >&2; exit 2; }

cores=$(nproc)
pids=()
stop_competitors() {
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  pids=()
}
trap stop_competitors EXIT INT TERM
start_competitors() {
  for ((i = 0; i < competitors; i++)); do
    taskset -c $((i % cores)) bash -c 'while :; do :; done' &
    pids+=($!)
  done
  sleep 1  # let the scheduler settle them
}

declare -A result
# qkv bench's table rows: prefill, decode and the 16-sequence batch row.
run_qkv() {  # load label, thread flag
  local out
  out=$("$qkv" bench -m "$model" --prompt-lengths "$prompt" --depths 0 --batches 16 --reps "$reps" --no-probe $2 \
        "${extra[@]}" 2>/dev/null)
  result[$1,prefill,qkv$2]=$(awk '$1 == "prefill" {print $5}' <<<"$out")
  result[$1,decode,qkv$2]=$(awk '$1 == "decode" {print $5}' <<<"$out")
  result[$1,batch16,qkv$2]=$(awk '$1 == "batch" && $4 == 16 {print $5}' <<<"$out")
}
run_peer() {  # load label, thread count
  local out
  if [[ -n $peer ]]; then
    out=$("$peer" -m "$model" -p "$prompt" -n 64 -r "$reps" -t "$2" -o csv 2>/dev/null)
    # The last column is stddev_ts, the one before avg_ts; n_prompt and n_gen tell the rows apart.
    result[$1,prefill,peer-t$2]=$(awk -F'","' 'NR > 1 && $(NF-6) != "0" {v=$(NF-1)} END {printf "%.1f", v}' <<<"$out")
    result[$1,decode,peer-t$2]=$(awk -F'","' 'NR > 1 && $(NF-6) == "0" {v=$(NF-1)} END {printf "%.1f", v}' <<<"$out")
  fi
  if [[ -n $peer_batched ]]; then
    out=$("$peer_batched" -m "$model" -c 4096 -b 2048 -ub 512 -npp 128 -ntg 32 -npl 16 -t "$2" 2>/dev/null)
    result[$1,batch16,peer-t$2]=$(awk -F'|' '$4 + 0 == 16 {gsub(/ /, "", $9); print $9}' <<<"$out")
  fi
}
measure() {  # load label
  run_qkv "$1" ""
  run_qkv "$1" "-t 1"
  if [[ -n $peer || -n $peer_batched ]]; then
    run_peer "$1" "$cores"
    run_peer "$1" 1
  fi
}

if ((idle)); then measure idle; fi
start_competitors
measure "busy$competitors"
stop_competitors

loads=()
((idle)) && loads+=(idle)
loads+=("busy$competitors")
columns=("qkv" "qkv-t 1")
[[ -n $peer || -n $peer_batched ]] && columns+=("peer-t$cores" "peer-t1")
printf '%s: %s, %d cores, %d competitors; tokens/s\n' "$(basename "$model")" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$cores" "$competitors"
printf '%-8s %-9s' load test
printf ' %14s' "qkv default" "qkv -t 1" "default/-t 1"
[[ -n $peer || -n $peer_batched ]] && printf ' %14s' "peer -t $cores" "peer -t 1"
printf '\n'
for load in "${loads[@]}"; do
  for test in prefill decode batch16; do
    d=${result[$load,$test,qkv]:-}
    one=${result[$load,$test,qkv-t 1]:-}
    ratio=$(awk -v a="$d" -v b="$one" 'BEGIN {if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-"}')
    printf '%-8s %-9s %14s %14s %14s' "$load" "$test" "${d:--}" "${one:--}" "$ratio"
    if [[ -n $peer || -n $peer_batched ]]; then
      printf ' %14s %14s' "${result[$load,$test,peer-t$cores]:--}" "${result[$load,$test,peer-t1]:--}"
    fi
    printf '\n'
  done
done
