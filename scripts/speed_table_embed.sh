# shellcheck shell=bash
# scripts/speed_table.sh --embed, sourced by it after its argument checks (it
# sets qkv, llama_dir, out, threads, reps_all, quick, embed_batch, embed_texts,
# embed_lengths (comma-separated), cpu_info).
# For each encoder preset and weight type: writes the model (`qkv make-model`),
# runs `qkv bench --embed` on it and, with --llama-cpp, llama-embedding on the
# same file with texts of the same token lengths (lines of single-token words
# of the synthetic vocabulary, counted with `qkv tokenize`), the same threads
# and the same tokens per forward pass (-b = -ub = -c, since llama-embedding
# asserts n_batch >= n_ctx). llama.cpp's time is its prompt eval time
# (llama_perf_context_print: the forward passes alone, as qkv's rows time
# qkv_embed's work); its whole process wall time is reported beside it.
# Prints a Markdown table on stdout.

IFS=, read -r -a embed_lengths <<<"$embed_lengths"
# name | make-model preset | type
embed_cases=(
  "bge-small-f16|bge-small|f16" "bge-small-q8_0|bge-small|q8_0"
  "bge-base-f16|bge-base|f16" "bge-base-q8_0|bge-base|q8_0"
  "nomic-embed-f16|nomic-embed|f16" "nomic-embed-q8_0|nomic-embed|q8_0"
)
((quick)) && embed_cases=("bge-small-f16|bge-small|f16" "bge-small-q8_0|bge-small|q8_0")
embed_reps=${reps_all:-3}

use_llama=0
if [[ -n $llama_dir ]]; then
  if [[ -x $llama_dir/llama-embedding ]]; then
    use_llama=1
    llama_dir=$(cd "$llama_dir" && pwd)
  else
    echo "speed_table.sh: missing $llama_dir/llama-embedding: printing qkv's rows alone" >&2
  fi
fi
mkdir -p "$out"
failed=0

# write_texts MODEL LENGTH FILE: $embed_texts lines, each LENGTH tokens with [CLS] and [SEP].
write_texts() {
  local model=$1 L=$2 file=$3
  python3 - "$L" "$embed_texts" >"$file" <<'PY'
import random, sys
L, n = int(sys.argv[1]), int(sys.argv[2])
# Words the synthetic vocabulary holds whole (runtime/synthetic_encoder.cc).
words = ("the of and to in is it you that he was for on are with as his they be at one have this from or had by "
         "not word but what some we can out other were all there when up use your how said an each she which do "
         "their time if will way about many then them write would like so these her long make thing see him two "
         "has look more day could go come did number sound no most people my over know water than call first").split()
rng = random.Random(L)
for _ in range(n):
    print(" ".join(rng.choice(words) for _ in range(L - 2)))
PY
  local got
  got=$("$qkv" tokenize -m "$model" --eos -- "$(head -n 1 "$file")" | wc -w)
  if [[ $got != "$L" ]]; then
    echo "speed_table.sh: a line of $file takes $got tokens, not $L" >&2
    return 1
  fi
}

selected=()
for c in "${embed_cases[@]}"; do
  IFS='|' read -r name preset type <<<"$c"
  selected+=("$name")
  model=$out/$name.gguf
  if [[ ! -f $model ]]; then
    echo "== $name: writing $model" >&2
    "$qkv" make-model "$preset" --type "$type" -o "$model.tmp" >&2
    mv "$model.tmp" "$model"
  fi
  echo "== $name: qkv bench --embed" >&2
  rm -f "$out/$name.qkv-embed.json" "$out/$name.llama-embedding.txt"
  "$qkv" bench --embed -m "$model" --embed-texts "$embed_texts" --embed-batch "$embed_batch" \
    --embed-lengths "$(IFS=,; echo "${embed_lengths[*]}")" \
    --reps "$embed_reps" -t "$threads" -q --json-out "$out/$name.qkv-embed.json" >&2 || failed=1
  ((use_llama)) || continue
  ctx=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["context_length"])' \
    "$out/$name.qkv-embed.json") || { failed=1; continue; }
  for L in "${embed_lengths[@]}" query; do
    len=$L texts=$out/embed-$L.txt
    [[ $L == query ]] && len=16
    ((len <= ctx)) || continue
    if [[ $L == query ]]; then
      write_texts "$model" 16 "$texts.all" && head -n 1 "$texts.all" >"$texts" || { failed=1; continue; }
    else
      write_texts "$model" "$L" "$texts" || { failed=1; continue; }
    fi
    for ((r = 0; r < embed_reps; r++)); do
      echo "== $name: llama-embedding $L rep $r" >&2
      start=$(date +%s.%N)
      if ! LD_LIBRARY_PATH=$llama_dir "$llama_dir/llama-embedding" -m "$model" -f "$texts" -t "$threads" \
          --pooling mean -b "$embed_batch" -ub "$embed_batch" -c "$embed_batch" --embd-output-format array \
          >/dev/null 2>"$out/$name.llama-embedding.log"; then
        echo "speed_table.sh: llama-embedding failed on $name ($L): see $out/$name.llama-embedding.log" >&2
        failed=1
        break
      fi
      end=$(date +%s.%N)
      eval_ms=$(sed -n 's/.*prompt eval time = *\([0-9.]*\) ms \/ *\([0-9]*\) tokens.*/\1 \2/p' \
        "$out/$name.llama-embedding.log")
      echo "$L $eval_ms $(python3 -c "print(($end - $start) * 1e3)")" >>"$out/$name.llama-embedding.txt"
    done
  done
done

python3 - "$out" "$threads" "$use_llama" "$llama_dir" "$embed_batch" "$embed_texts" "$cpu_info" \
  "${selected[@]}" <<'PY' || failed=1
import datetime, json, os, statistics, sys

out, threads, use_llama, llama_dir, batch, n_texts = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4], \
    sys.argv[5], int(sys.argv[6])
host = "; ".join(l for l in sys.argv[7].split("\n") if l.startswith("simd target") or l.startswith("cpu:"))
names = sys.argv[8:]
missing = False
rows = []
loads = []
for name in names:
    try:
        d = json.load(open(os.path.join(out, f"{name}.qkv-embed.json")))
    except (OSError, ValueError) as e:
        print(f"speed_table.sh: {name}: no qkv bench --embed JSON: {e}", file=sys.stderr)
        missing = True
        continue
    loads.append(d["load_average"]["start"])
    llama = {}
    if use_llama:
        try:
            for line in open(os.path.join(out, f"{name}.llama-embedding.txt")):
                f = line.split()
                if len(f) == 4:
                    llama.setdefault(f[0], []).append((float(f[1]), int(f[2]), float(f[3])))
        except OSError:
            pass
    for r in d["rows"]:
        key = "query" if r["kind"] == "query" else str(r["tokens_per_text"])
        s = r["seconds"]
        if r["kind"] == "query":
            test = "one 16-token query"
            q = f"{s['median'] * 1e3:.2f} ms [{s['min'] * 1e3:.2f}..{s['max'] * 1e3:.2f}]"
            limit = (f"{r['latency_over_read']:.2f}x weight read" if r["latency_over_read"] is not None else "-")
        else:
            test = f"{r['texts']} x {r['tokens_per_text']} tokens"
            q = f"{r['sentences_per_s']:.1f} [{r['texts'] / s['max']:.1f}..{r['texts'] / s['min']:.1f}]"
            limit = (f"{r['gemm_gflops']:.0f} GFLOP/s, {r['fma_peak_pct']:.0f}% FMA peak"
                     if r["fma_peak_pct"] is not None else f"{r['gemm_gflops']:.0f} GFLOP/s")
        cells = [name, test, q, limit]
        if use_llama:
            runs = llama.get(key)
            if not runs:
                missing = True
                print(f"speed_table.sh: {name} {test}: no llama-embedding figure", file=sys.stderr)
                cells += ["-", "-", "-"]
            else:
                ms = statistics.median(x[0] for x in runs)
                wall = statistics.median(x[2] for x in runs)
                if r["kind"] == "query":
                    cells += [f"{ms:.2f} ms", f"{wall:.0f} ms", f"{ms / (s['median'] * 1e3):.2f}x"]
                else:
                    n = n_texts
                    cells += [f"{n / (ms * 1e-3):.1f}", f"{wall:.0f} ms", f"{r['sentences_per_s'] / (n / (ms * 1e-3)):.2f}x"]
        rows.append(cells)

line = f"{datetime.date.today().isoformat()}, host: {host}; {threads} threads; {batch} tokens per forward pass"
if loads:
    line += f"; load average at the start of qkv's runs {min(loads):.2f}..{max(loads):.2f}"
if use_llama:
    line += f"; llama.cpp {llama_dir} (llama-embedding --pooling mean, -b/-ub/-c {batch})"
print(line)
print()
print("Sentences/s: median [range] over the reps; llama.cpp's from its prompt eval time (median over the reps), "
      "its process wall time (load, tokenization and output included) beside it. Query: latency.")
print()
head = ["model", "test", "qkv sentences/s or latency", "of the machine"]
if use_llama:
    head += ["llama.cpp", "llama.cpp wall", "qkv / llama.cpp"]
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for cells in rows:
    print("| " + " | ".join(cells) + " |")
sys.exit(1 if missing else 0)
PY
if ((failed)); then
  echo "speed_table.sh: some figures are missing (see the messages above)" >&2
  exit 1
fi
exit 0
