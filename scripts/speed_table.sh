#!/usr/bin/env bash
# Measures the README's speed table: qkv bench on synthetic models of the
# shapes and weight types that llama.cpp's figures (b4748, 2 threads, from the
# project's issues) were taken on, and prints the table in Markdown.
#   scripts/speed_table.sh [OUT_DIR]   (default build/speed; JSON per case)
# Run it on a quiet machine; each case is one `qkv bench` run with its own probe.
set -euo pipefail
cd "$(dirname "$0")/.."
qkv=build/tools/qkv
out=${1:-build/speed}
mkdir -p "$out"
threads=${QKV_THREADS:-2}
# name | bench flags | rows: kind:tokens:depth:batch=llama.cpp figure, ...
cases=(
  "143M-f16|--synthetic 143M --type f16 --prompt-lengths 512 --depths 0 --batches 1,16|prefill:512:0:1=-,decode:32:0:1=-,batch:32:128:16=166"
  "143M-q4_0|--synthetic 143M --type q4_0 --prompt-lengths 512 --depths 0 --batches 1,16|prefill:512:0:1=835-898,decode:32:0:1=255-324,batch:32:128:16=-"
  "143M-q4_k_m|--synthetic 143M --type q4_k_m --prompt-lengths 512 --depths 0 --batches 1,16|prefill:512:0:1=489-531,decode:32:0:1=105-142,batch:32:128:16=-"
  "1.1B-q8_0|--synthetic 1.1B --type q8_0 --prompt-lengths 256 --depths 0 --batches none --reps 3|prefill:256:0:1=220,decode:32:0:1=24.5"
  "1.1B-q4_k_m|--synthetic 1.1B --type q4_k_m --prompt-lengths 256 --depths 0 --batches 1,16 --reps 3|prefill:256:0:1=179,decode:32:0:1=27.2,batch:32:128:16=-"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name flags _ <<<"$c"
  echo "== $name" >&2
  # shellcheck disable=SC2086
  "$qkv" bench $flags -t "$threads" -q --json-out "$out/$name.json" >&2
done
python3 - "$out" "${cases[@]}" <<'PY'
import json, sys
out, cases = sys.argv[1], sys.argv[2:]
print("| model | test | qkv tok/s (median [min..max]) | of the machine | llama.cpp tok/s |")
print("| --- | --- | --- | --- | --- |")
for c in cases:
    name, _, rows = c.split("|")
    d = json.load(open(f"{out}/{name}.json"))
    for spec in rows.split(","):
        key, ref = spec.split("=")
        kind, tokens, depth, batch = key.split(":")
        r = next(r for r in d["rows"] if r["kind"] == kind and r["tokens"] == int(tokens)
                 and r["depth"] == int(depth) and r["batch"] == int(batch))
        t = r["tokens_per_s"]
        if kind == "prefill":
            test, limit = f"prefill {tokens}", f"{r['fma_peak_pct']:.0f}% FMA peak"
        elif kind == "decode":
            test, limit = "decode", f"{r['dram_bw_pct_paired']:.0f}% paired read"
        else:
            test, limit = f"{batch} sequences", f"{r['speedup_vs_batch1']:.2f}x one"
        print(f"| {name} | {test} | {t['median']:.1f} [{t['min']:.1f}..{t['max']:.1f}] | {limit} | {ref} |")
PY
