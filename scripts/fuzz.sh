#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/, clang-14, -DQKV_FUZZ=ON in
# build-fuzz/), makes their seeds (scripts/fuzz_seeds.sh) and runs each for
# QKV_FUZZ_SECONDS (default 45) from them, up to nproc at a time; any crash,
# sanitizer report, leak, timeout or out-of-memory fails the script and leaves
# the input in build-fuzz/findings/. The run is bounded: harnesses x seconds /
# parallel runs stays within QKV_FUZZ_BUDGET seconds (default 480).
#   QKV_FUZZ_ONLY="gguf tokenizer"  run only these harnesses
#   QKV_BIN                          the qkv binary that writes the seeds (default build/tools/qkv)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${QKV_FUZZ_SECONDS:-45}
budget=${QKV_FUZZ_BUDGET:-480}
dir=build-fuzz
cc=$(command -v clang-14 || true)
cxx=$(command -v clang++-14 || true)
[ -n "$cc" ] && [ -n "$cxx" ] || { echo "fuzz: clang-14 is missing (scripts/setup.sh --tests installs it)" >&2; exit 1; }

CC=$cc CXX=$cxx cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_FUZZ=ON -DQKV_SKIP_AVX2_AVX3=ON \
  -DQKV_BUILD_TESTS=OFF -DQKV_BUILD_BENCH=OFF >/dev/null
harnesses=${QKV_FUZZ_ONLY:-$(basename -s .cc tests/fuzz/*.cc | tr '\n' ' ')}
targets=""
for h in $harnesses; do targets="$targets fuzz_$h"; done
# shellcheck disable=SC2086
cmake --build "$dir" -j"$(nproc)" --target $targets
scripts/fuzz_seeds.sh "$dir/seeds"

parallel=$(nproc)
n=$(echo $harnesses | wc -w)
rounds=$(( (n + parallel - 1) / parallel ))
if [ $((rounds * seconds)) -gt "$budget" ]; then
  seconds=$((budget / rounds))
  echo "fuzz: $seconds s per harness to stay within $budget s"
fi

mkdir -p "$dir/findings" "$dir/logs"
# The dictionary of each harness (tests/fuzz/*.dict).
dict_of() {
  case $1 in
    gguf|quantize) echo tests/fuzz/gguf.dict ;;
    chat_template) echo tests/fuzz/jinja.dict ;;
    serve_request|grammar) echo tests/fuzz/json.dict ;;
  esac
}
run_one() {
  local h=$1 corpus
  corpus=$(mktemp -d)
  local args=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1
              -artifact_prefix="$dir/findings/$h-")
  local d
  d=$(dict_of "$h")
  [ -n "$d" ] && args+=(-dict="$d")
  local rc=0
  TMPDIR=$corpus "$dir/tests/fuzz/fuzz_$h" "${args[@]}" "$corpus" "$dir/seeds/$h" > "$dir/logs/$h.log" 2>&1 || rc=$?
  rm -rf "$corpus"
  local last
  last=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$dir/logs/$h.log" | tail -n 1 || true)
  local execs
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/logs/$h.log")
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$h: FINDING (exit $rc), log $dir/logs/$h.log:"
    grep -E 'ERROR|SUMMARY|Test unit written|runtime error' "$dir/logs/$h.log" | head -n 20
    return 1
  fi
  echo "fuzz_$h: ok, ${seconds} s, ${execs:-?} execs/s, ${last}"
}

pids=()
names=()
failed=0
for h in $harnesses; do
  if [ "$h" = tokenizer ] && [ ! -d "${QKV_FUZZ_SHARED:-../shared}/vocab" ]; then
    echo "fuzz_tokenizer: skipped, no vocabularies in ../shared/vocab"
    continue
  fi
  run_one "$h" &
  pids+=($!)
  names+=("$h")
  if [ ${#pids[@]} -ge "$parallel" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || { echo "fuzz: findings in $dir/findings" >&2; exit 1; }
echo "fuzz: every harness ran clean"
