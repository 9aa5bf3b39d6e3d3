#!/usr/bin/env bash
# qkv make-model for an encoder preset, then qkv embed and qkv bench --embed on
# the file (and on the preset built in memory): the outputs parse and hold what
# was asked; bad presets, families and flags fail with a message.
# Usage: cli_bench_embed.sh QKV
set -u
qkv=$1
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_error() {  # expect_error DESCRIPTION STATUS NEEDLE COMMAND...: that exit status and NEEDLE on stderr
  local what=$1 want=$2 needle=$3
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -ne $want || "$err" != *"$needle"* ]]; then
    fail "$what (exit $rc, want $want): $err"
  else
    echo "ok: $what"
  fi
}

model=$tmp/tiny-bert.gguf
"$qkv" make-model tiny-bert --type q8_0 --arch bert -o "$model" -q || fail "make-model tiny-bert"
"$qkv" embed -m "$model" --json -t 2 "Hello world!" "The quick brown fox." >"$tmp/embed.json" || fail "qkv embed"
python3 - "$tmp/embed.json" <<'PY' || fail "qkv embed's JSON"
import json, math, sys
d = json.load(open(sys.argv[1]))
v = [x["embedding"] for x in d["data"]]
assert len(v) == 2 and all(len(x) == 64 for x in v), [len(x) for x in v]
for x in v:
    assert abs(math.sqrt(sum(a * a for a in x)) - 1) < 1e-5, "not L2-normalized"
assert v[0] != v[1], "two texts gave one vector"
assert d["object"] == "list" and [x["index"] for x in d["data"]] == [0, 1], d["data"][0].keys()
PY
"$qkv" tokenize -m "$model" --eos "Hello world!" >"$tmp/ids.txt" 2>/dev/null &&
  python3 -c 'import sys; ids = [int(x) for x in open(sys.argv[1]).read().split()]; assert len(ids) >= 4 and ids[0] == 101 and ids[-1] == 102 and 100 not in ids, ids' \
    "$tmp/ids.txt" || fail "tokenize with the synthetic vocabulary: $(cat "$tmp/ids.txt")"

"$qkv" bench --embed -m "$model" --embed-texts 4 --embed-lengths 16,256 --reps 1 --warmup 0 --query-reps 2 \
  --no-probe --json -t 2 >"$tmp/bench.json" || fail "qkv bench --embed -m"
python3 - "$tmp/bench.json" <<'PY' || fail "qkv bench --embed's JSON"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert [(r["kind"], r["tokens_per_text"], r["texts"]) for r in rows] == [("batch", 16, 4), ("query", 16, 1)], rows
assert all(r["sentences_per_s"] > 0 and r["gemm_gflops"] > 0 for r in rows), rows
assert d["model"]["architecture"] == "bert" and d["model"]["weight_type"] == "q8_0", d["model"]
assert any("length 256 skipped" in n for n in d["notes"]), d["notes"]
assert d["threads"] == 2 and d["cpu"].startswith("cpu: "), d["cpu"]
PY
"$qkv" bench --embed --synthetic tiny-bert --type f16 --embed-texts 3 --embed-lengths 32 --reps 1 --query-reps 1 \
  --probe-mib 64 -t 2 >"$tmp/bench.txt" || fail "qkv bench --embed --synthetic"
grep -q "^batch  *32  *3 " "$tmp/bench.txt" || fail "no batch row in the table: $(cat "$tmp/bench.txt")"
grep -q "one query takes .*x the time of reading the layer weights once" "$tmp/bench.txt" ||
  fail "no read-time ratio in the table: $(cat "$tmp/bench.txt")"

expect_error "unknown encoder preset" 1 "unknown synthetic model preset 'bge-huge'" \
  "$qkv" make-model bge-huge -o "$tmp/x.gguf"
expect_error "preset and family disagree" 1 "'bge-small' is a 'bert' encoder; --arch nomic-bert does not match" \
  "$qkv" make-model bge-small --arch nomic-bert -o "$tmp/x.gguf"
expect_error "a decoder shape as bert" 1 "'bert' is an encoder family" "$qkv" make-model tiny --arch bert -o "$tmp/x.gguf"
expect_error "untied encoder" 2 "--untied is for decoders" "$qkv" make-model tiny-bert --untied -o "$tmp/x.gguf"
expect_error "a decoder preset in bench --embed" 2 "'143M' is not an encoder preset" \
  "$qkv" bench --embed --synthetic 143M
expect_error "bad lengths" 1 "--embed-lengths" "$qkv" bench --embed --synthetic tiny-bert --embed-lengths 16,x
expect_error "a length under 3" 1 "--embed-lengths" "$qkv" bench --embed --synthetic tiny-bert --embed-lengths 2
expect_error "-m and --synthetic" 2 "exclude each other" "$qkv" bench --embed -m "$model" --synthetic tiny-bert
expect_error "unknown flag" 2 "unknown or unsupported flag '--depths'" "$qkv" bench --embed --depths 0
"$qkv" make-model tiny -o "$tmp/decoder.gguf" -q || fail "make-model tiny"
expect_error "a decoder file in bench --embed" 1 "the embedding benchmark runs encoders" \
  "$qkv" bench --embed -m "$tmp/decoder.gguf" --no-probe
"$qkv" bench --embed --help | grep -q -- "--embed-lengths" || fail "bench --embed --help"
"$qkv" bench --help | grep -q -- "--embed " || fail "bench --help lacks --embed"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all qkv bench --embed / make-model encoder checks passed"
