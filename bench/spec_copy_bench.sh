#!/usr/bin/env bash
# Speculative decoding on copying prompts: plain greedy decoding against
# prompt lookup (--spec-type ngram) and, with --draft, a draft model, on one
# stream; the outputs must be identical. Each prompt holds a passage of the
# text twice and then its first words, asking for it back the way an editing
# or extraction request does. The passages start at evenly spaced words of
# the text (no choosing), so the figures include the passages the model does
# not copy. With --llama-cpp DIR, llama.cpp's llama-lookup (and
# llama-speculative with --draft) run on the same prompts.
#
# usage: bench/spec_copy_bench.sh QKV MODEL [--text FILE] [--passages N] [--words N]
#          [-n N] [-t N] [--draft-max N] [--draft FILE] [--llama-cpp DIR]
set -euo pipefail

usage() { sed -n '/^# usage:/,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
QKV=$1 MODEL=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
TEXT=$here/../shared/reference/ppl-text.txt PASSAGES=8 WORDS=50 N=120 THREADS=2 DRAFT_MAX=8 DRAFT="" LLAMA=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --text) TEXT=$2; shift 2 ;;
    --passages) PASSAGES=$2; shift 2 ;;
    --words) WORDS=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --draft-max) DRAFT_MAX=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --llama-cpp) LLAMA=$2; shift 2 ;;
    *) echo "spec_copy_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ -x $QKV ]] || { echo "spec_copy_bench: '$QKV' is not an executable" >&2; exit 2; }
[[ -f $MODEL ]] || { echo "spec_copy_bench: no model file '$MODEL'" >&2; exit 2; }
[[ -f $TEXT ]] || { echo "spec_copy_bench: no text file '$TEXT' (--text FILE)" >&2; exit 2; }
[[ -z $DRAFT || -f $DRAFT ]] || { echo "spec_copy_bench: no draft model '$DRAFT'" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$(dirname "$0")/copy_prompts.py" "$TEXT" "$PASSAGES" "$WORDS" "$work" || exit 2

# qkv run's eval line: "eval time = X ms / K tokens"; its speculative line: "D drafted, A accepted".
eval_ms() { sed -n 's/^qkv: eval time *= *\([0-9.]*\) ms \/ *\([0-9]*\) tokens.*/\1 \2/p' "$1"; }
drafts() { sed -n 's/.*: \([0-9]*\) drafted, \([0-9]*\) accepted.*/\1 \2/p' "$1"; }

modes=(plain ngram)
[[ -n $DRAFT ]] && modes+=(draft)
declare -A ms tokens drafted accepted
for m in "${modes[@]}"; do ms[$m]=0; tokens[$m]=0; drafted[$m]=0; accepted[$m]=0; done
differ=0
echo "model $(basename "$MODEL"), $PASSAGES passages of $WORDS words, -n $N, -t $THREADS, --draft-max $DRAFT_MAX"
printf '%-8s %10s %10s %9s %10s %9s\n' passage plain_t/s ngram_t/s accept draft_t/s accept
for ((i = 0; i < PASSAGES; ++i)); do
  prompt=$(cat "$work/prompt$i.txt")
  row=$(printf '%-8s' "$i")
  for m in "${modes[@]}"; do
    extra=()
    case $m in
      ngram) extra=(--spec-type ngram --draft-max "$DRAFT_MAX") ;;
      draft) extra=(-md "$DRAFT" --draft-max "$DRAFT_MAX") ;;
    esac
    "$QKV" run -m "$MODEL" -p "$prompt" -n "$N" --temp 0 -t "$THREADS" --no-display-prompt "${extra[@]}" \
      > "$work/$m$i.out" 2> "$work/$m$i.err" || { echo "spec_copy_bench: qkv run ($m) failed:" >&2; cat "$work/$m$i.err" >&2; exit 1; }
    read -r t k < <(eval_ms "$work/$m$i.err")
    ms[$m]=$(python3 -c "print(${ms[$m]} + $t)")
    tokens[$m]=$((tokens[$m] + k))
    row+=$(printf ' %10.0f' "$(python3 -c "print($k / $t * 1000)")")
    if [[ $m != plain ]]; then
      read -r d a < <(drafts "$work/$m$i.err")
      drafted[$m]=$((drafted[$m] + d)); accepted[$m]=$((accepted[$m] + a))
      row+=$(printf ' %8.0f%%' "$(python3 -c "print(100 * $a / max(1, $d))")")
      cmp -s "$work/plain$i.out" "$work/$m$i.out" || { differ=1; row+=" (output differs)"; }
    fi
  done
  echo "$row"
done
plain_rate=$(python3 -c "print(${tokens[plain]} / ${ms[plain]} * 1000)")
printf 'all: plain %.0f tokens/s' "$plain_rate"
for m in "${modes[@]:1}"; do
  printf '; %s %.0f tokens/s (%.2fx), %d of %d drafts accepted (%.1f%%)' "$m" \
    "$(python3 -c "print(${tokens[$m]} / ${ms[$m]} * 1000)")" \
    "$(python3 -c "print(${tokens[$m]} / ${ms[$m]} * 1000 / $plain_rate)")" "${accepted[$m]}" "${drafted[$m]}" \
    "$(python3 -c "print(100 * ${accepted[$m]} / max(1, ${drafted[$m]}))")"
done
echo

if [[ -n $LLAMA ]]; then
  export LD_LIBRARY_PATH=$LLAMA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # llama-lookup / llama-speculative: "decoded K tokens in S seconds" and "accept = P%".
  for tool in llama-lookup llama-speculative; do
    [[ $tool == llama-speculative && -z $DRAFT ]] && continue
    [[ -x $LLAMA/$tool ]] || { echo "$tool: not in $LLAMA"; continue; }
    total_k=0 total_s=0 acc=""
    for ((i = 0; i < PASSAGES; ++i)); do
      args=(-m "$MODEL" -f "$work/prompt$i.txt" -n "$N" --temp 0 -t "$THREADS" --draft-max "$DRAFT_MAX")
      [[ $tool == llama-speculative ]] && args+=(-md "$DRAFT")
      "$LLAMA/$tool" "${args[@]}" > "$work/$tool$i.log" 2>&1 || { echo "$tool failed on prompt $i (log below)"; tail -5 "$work/$tool$i.log"; continue; }
      read -r k s < <(sed -n 's/^decoded *\([0-9]*\) tokens in *\([0-9.]*\) seconds.*/\1 \2/p' "$work/$tool$i.log")
      total_k=$((total_k + k)); total_s=$(python3 -c "print($total_s + $s)")
      acc+=" $(sed -n 's/^accept *= *\([0-9.]*\)%.*/\1/p' "$work/$tool$i.log")%"
    done
    printf '%s: %.0f tokens/s over the passages; acceptance per passage:%s\n' "$tool" \
      "$(python3 -c "print($total_k / max(1e-9, $total_s))")" "$acc"
  done
fi
exit $differ
