#!/usr/bin/env bash
# qkv embed: each output format (listing, array, json, json+, rank scores)
# parsed and compared with llama-embedding b4748's numbers in
# ../shared/reference/*.embed.json, and clear errors for bad flags.
# Tolerances as tests/test_embed.cc (embed-README.md): bert 1e-3 raw, 2e-4 L2
# (llama.cpp's fp16 GELU table); qwen2 with its F32 KV cache 1e-5; printed
# values carry 7 decimals (json) or 6 (listing: 1e-6 more).
# Usage: cli_embed.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared data.
set -u
qkv=$1
shared=$2
models=$shared/models
refs=$shared/reference
for f in $models/arch-bert-a.gguf $models/arch-bert-rank-a.gguf $models/arch-qwen2-a.gguf \
         $refs/arch-bert-a.embed.json $refs/arch-bert-rank-a.embed.json $refs/arch-qwen2-a.embed.json; do
  if [[ ! -f $f ]]; then
    echo "SKIPPED: $f is absent"
    exit 0
  fi
done
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# check NAME PYTHON: runs PYTHON with the reference JSON at sys.argv[1] and the
# command's output on stdin; it prints the max difference and fails with a message.
check() {
  local what=$1 ref=$2 out=$3 script=$4
  if ! python3 -c "$script" "$ref" <"$out"; then
    echo "FAIL: $what"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
expect_error() {  # expect_error DESCRIPTION NEEDLE COMMAND...: a nonzero exit and NEEDLE on stderr
  local what=$1 needle=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -eq 0 || "$err" != *"$needle"* ]]; then
    echo "FAIL: $what (exit $rc): $err"
    failures=$((failures + 1))
  fi
}

# The reference texts joined by newlines, as llama-embedding's -p got them.
texts() { python3 -c 'import json,sys; print("\n".join(t["text"] for t in json.load(open(sys.argv[1]))["texts"]), end="")' "$1"; }

bert_texts=$(texts $refs/arch-bert-a.embed.json)
"$qkv" embed -m $models/arch-bert-a.gguf --embd-normalize -1 --embd-output-format json -p "$bert_texts" >"$tmp/mean.json"
check "bert MEAN raw, json" $refs/arch-bert-a.embed.json "$tmp/mean.json" '
import json, sys
ref = json.load(open(sys.argv[1]))["pooled"]["mean"]["raw"]
out = json.load(sys.stdin)
assert out["object"] == "list" and [d["index"] for d in out["data"]] == list(range(8)), "indices"
got = [d["embedding"] for d in out["data"]]
diff = max(abs(a - b) for g, r in zip(got, ref) for a, b in zip(g, r))
assert len(got) == 8 and all(len(g) == 128 for g in got), "shape"
assert diff <= 1e-3, diff
'
printf '%s\n' "$bert_texts" >"$tmp/texts.txt"
"$qkv" embed -m $models/arch-bert-a.gguf --pooling cls --embd-output-format array -f "$tmp/texts.txt" >"$tmp/cls.json"
check "bert CLS L2 (the default normalization), array from -f" $refs/arch-bert-a.embed.json "$tmp/cls.json" '
import json, sys
ref = json.load(open(sys.argv[1]))["pooled"]["cls"]["l2"]
got = json.load(sys.stdin)
assert len(got) == 8 and all(len(g) == 128 for g in got), "shape"
diff = max(abs(a - b) for g, r in zip(got, ref) for a, b in zip(g, r))
assert diff <= 2e-4, diff
'
"$qkv" embed -m $models/arch-bert-a.gguf --embd-output-format json+ --embd-separator '|' -p 'a|Hello world!' >"$tmp/plus.json"
check "json+ has the cosine similarity matrix" $refs/arch-bert-a.embed.json "$tmp/plus.json" '
import json, sys
ref = json.load(open(sys.argv[1]))["pooled"]["mean"]["l2"]
out = json.load(sys.stdin)
m = out["cosineSimilarity"]
assert len(m) == 2 and m[0][0] == 1.0 and m[1][1] == 1.0 and m[0][1] == m[1][0], m
cos = sum(a * b for a, b in zip(ref[0], ref[1]))
assert abs(m[0][1] - cos) <= 0.006, (m[0][1], cos)
diff = max(abs(a - b) for d, r in zip(out["data"], ref[:2]) for a, b in zip(d["embedding"], r))
assert diff <= 2e-4, diff
'
"$qkv" embed -m $models/arch-bert-a.gguf --pooling none --embd-normalize -1 --json a >"$tmp/none.json"
check "per token, one input per argument" $refs/arch-bert-a.embed.json "$tmp/none.json" '
import json, sys
ref = json.load(open(sys.argv[1]))["per_token"]["embeddings"][0]
got = [d["embedding"] for d in json.load(sys.stdin)["data"]]
assert len(got) == 3, len(got)
diff = max(abs(a - b) for g, r in zip(got, ref) for a, b in zip(g, r))
assert diff <= 2e-3, diff
'
"$qkv" embed -m $models/arch-bert-a.gguf --embd-normalize -1 "Hello world!" >"$tmp/listing.txt"
check "listing of one text: every value" $refs/arch-bert-a.embed.json "$tmp/listing.txt" '
import json, sys
ref = json.load(open(sys.argv[1]))["pooled"]["mean"]["raw"][1]
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("embedding 0: ")]
got = [float(x) for x in lines[0].split(":")[1].split()]
assert len(got) == 128, len(got)
diff = max(abs(a - b) for a, b in zip(got, ref))
assert diff <= 1e-3 + 1e-6, diff
'
"$qkv" embed -m $models/arch-bert-a.gguf --dimensions 16 --embd-normalize 0 --json a >"$tmp/dims.json"
check "--dimensions 16 with max-abs int16 scaling" $refs/arch-bert-a.embed.json "$tmp/dims.json" '
import json, sys
ref = json.load(open(sys.argv[1]))["pooled"]["mean"]["raw"][0][:16]
got = json.load(sys.stdin)["data"][0]["embedding"]
top = max(abs(x) for x in ref)
# a raw error of 1e-3 on values up to ~3 is ~11 units after scaling by 32760 / max
want = [round(x * 32760 / top) for x in ref]
assert len(got) == 16 and max(abs(a - b) for a, b in zip(got, want)) <= 12, (got, want)
'

# Rank: "QUERY [SEP] DOCUMENT" per line, as llama-embedding got them.
rank_inputs=$(python3 -c 'import json,sys; print("\n".join(p["input_text"] for p in json.load(open(sys.argv[1]))["pairs"]), end="")' $refs/arch-bert-rank-a.embed.json)
"$qkv" embed -m $models/arch-bert-rank-a.gguf -p "$rank_inputs" >"$tmp/rank.txt"
check "rerank score lines" $refs/arch-bert-rank-a.embed.json "$tmp/rank.txt" '
import json, re, sys
ref = json.load(open(sys.argv[1]))["rank_scores"]
got = [float(m.group(2)) for m in re.finditer(r"^rerank score (\d+): +(\S+)$", sys.stdin.read(), re.M)]
assert len(got) == 3 and max(abs(a - b) for a, b in zip(got, ref)) <= 5e-4 + 2e-4, (got, ref)
'
"$qkv" embed -m $models/arch-bert-rank-a.gguf --json -p "$rank_inputs" >"$tmp/rank.json"
check "rank scores as json" $refs/arch-bert-rank-a.embed.json "$tmp/rank.json" '
import json, sys
ref = json.load(open(sys.argv[1]))["rank_scores"]
got = [d["embedding"] for d in json.load(sys.stdin)["data"]]
assert all(len(g) == 1 for g in got) and max(abs(g[0] - r) for g, r in zip(got, ref)) <= 2e-4, (got, ref)
'

# qwen2: LAST pooling (the decoder default), raw; the 608-token text is over the context of 512.
qwen_texts=$(python3 -c 'import json,sys; print("\n".join(t["text"] for t in json.load(open(sys.argv[1]))["texts"] if t["n_tokens"] <= 512), end="")' $refs/arch-qwen2-a.embed.json)
"$qkv" embed -m $models/arch-qwen2-a.gguf --embd-normalize -1 --json -t 2 -b 64 -p "$qwen_texts" >"$tmp/qwen.json"
check "qwen2 LAST raw (F32 KV cache), 64-token passes" $refs/arch-qwen2-a.embed.json "$tmp/qwen.json" '
import json, sys
d = json.load(open(sys.argv[1]))
ref = [v for v, t in zip(d["pooled"]["last"]["raw"], d["texts"]) if t["n_tokens"] <= 512]
got = [x["embedding"] for x in json.load(sys.stdin)["data"]]
assert len(got) == 7 and all(len(g) == 256 for g in got), "shape"
diff = max(abs(a - b) for g, r in zip(got, ref) for a, b in zip(g, r))
assert diff <= 1e-5, diff
'
long_text=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["texts"][6]["text"], end="")' $refs/arch-qwen2-a.embed.json)
expect_error "an input over the context" "input 0 has 608 tokens" "$qkv" embed -m $models/arch-qwen2-a.gguf "$long_text"
"$qkv" embed -m $models/arch-qwen2-a.gguf --truncate --json "$long_text" >"$tmp/long.json" ||
  { echo "FAIL: --truncate"; failures=$((failures + 1)); }

# Bad flags.
expect_error "no model" "-m MODEL is required" "$qkv" embed -p hi
expect_error "unknown pooling" "flag --pooling wants none, mean, cls, last or rank, not 'max'" \
  "$qkv" embed -m $models/arch-bert-a.gguf --pooling max -p hi
expect_error "bad normalization" "flag --embd-normalize wants a whole number from -1" \
  "$qkv" embed -m $models/arch-bert-a.gguf --embd-normalize -2 -p hi
expect_error "bad format" "flag --embd-output-format wants '', array, json or json+, not 'csv'" \
  "$qkv" embed -m $models/arch-bert-a.gguf --embd-output-format csv -p hi
expect_error "a flag is no value" "flag --pooling needs a value, but the next word is the flag '--json'" \
  "$qkv" embed -m $models/arch-bert-a.gguf --pooling --json -p hi
expect_error "too many dimensions" "dimensions 129 is more than the model's embedding width 128" \
  "$qkv" embed -m $models/arch-bert-a.gguf --dimensions 129 -p hi
expect_error "rank without a head" "RANK pooling needs a rank model" \
  "$qkv" embed -m $models/arch-bert-a.gguf --pooling rank -p hi
expect_error "two input sources" "give the inputs one way" "$qkv" embed -m $models/arch-bert-a.gguf -p hi there
expect_error "unknown flag" "unknown flag '--bogus'" "$qkv" embed -m $models/arch-bert-a.gguf --bogus -p hi
"$qkv" embed --help | grep -q -- "--embd-output-format" || { echo "FAIL: --help"; failures=$((failures + 1)); }

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all qkv embed checks passed"
