#!/usr/bin/env bash
# Measures the README's speed table: for each case writes a synthetic model of a
# fixed shape and weight type as a GGUF file (`qkv make-model`), runs `qkv bench`
# on it and, with --llama-cpp, llama.cpp's llama-bench and llama-batched-bench on
# the same file right after it, so every row compares figures of one host and one
# run. Prints the table in Markdown on stdout; progress and logs go to stderr.
# With --embed it measures encoders instead (scripts/speed_table_embed.sh): the
# embedding presets through `qkv bench --embed` and llama.cpp's llama-embedding.
# It builds nothing: qkv is build/tools/qkv (or $QKV_BIN), llama.cpp the binaries
# in the --llama-cpp directory, run with their shared libraries beside them.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/speed_table.sh [--llama-cpp DIR] [--out DIR] [--threads N] [--quick] [--reps N]
                              [--all-types] [--isa LEVEL] [--cases REGEX]
                              [--embed [--embed-batch N] [--embed-texts N] [--embed-lengths L]]
  --embed          the encoder table instead: bge-small, bge-base and nomic-embed in F16 and
                   Q8_0, qkv bench --embed beside llama-embedding (sentences/s for 256 texts
                   of 16, 64, 256 and 512 tokens, and one 16-token query)
  --embed-batch N  --embed: tokens per forward pass for both runtimes (qkv bench --embed-batch,
                   llama-embedding -b/-ub/-c; default 2048, qkv_embed's default)
  --embed-texts N  --embed: texts per length (default 256)
  --embed-lengths L  --embed: tokens per text, comma-separated (default 16,64,256,512)
                   (--embed with --llama-cpp DIR needs DIR/llama-embedding)
  --llama-cpp DIR  llama.cpp binaries (llama-bench, llama-batched-bench and their shared
                   libraries): run on the same files in the same run, giving the llama.cpp
                   and ratio columns (default: qkv's rows alone)
  --out DIR        model files (reused when present), JSON and logs per case
                   (default: build/speed)
  --threads N      threads for both runtimes (default: qkv's, one per physical core)
  --quick          only the 143M cases (--embed: only bge-small)
  --cases REGEX    only the cases whose name (143M-f16, 1.1B-q4_k_m, ...) matches REGEX (bash =~)
  --all-types      143M and 1.1B each in F16, Q8_0, Q4_0 and Q4_K_M (8 cases; default: 5 of them)
  --isa LEVEL      qkv runs with its kernels capped at LEVEL (QKV_ISA: avx2, avx2-vnni, avx512, ...);
                   beside a llama.cpp built for the same level, e.g. AVX2 only
  --reps N         timed repetitions of every case (default 5 for 143M, 3 for 1.1B, 3 with --embed); each
                   runtime's figure is the median [min..max] over them
  -h, --help       this text
Environment: QKV_BIN, the qkv binary (default: build/tools/qkv).
EOF
}

die_usage() {
  echo "speed_table.sh: $1" >&2
  usage >&2
  exit 2
}

cd "$(dirname "$0")/.."
qkv=${QKV_BIN:-build/tools/qkv}
llama_dir=""
out=build/speed
threads=""
reps_all=""
quick=0
all_types=0
only_cases=""
isa=""
embed=0
embed_batch=2048
embed_texts=256
embed_lengths=16,64,256,512
while (($# > 0)); do
  case $1 in
    --llama-cpp | --out | --threads | --reps | --embed-batch | --embed-texts | --embed-lengths | --isa | --cases)
      (($# >= 2)) || die_usage "$1 needs a value"
      case $1 in
        --isa) isa=$2 ;;
        --cases) only_cases=$2 ;;
        --embed-lengths) embed_lengths=$2 ;;
        --embed-texts) embed_texts=$2 ;;
        --embed-batch) embed_batch=$2 ;;
        --llama-cpp) llama_dir=$2 ;;
        --out) out=$2 ;;
        --threads) threads=$2 ;;
        --reps) reps_all=$2 ;;
      esac
      shift 2
      ;;
    --quick) quick=1; shift ;;
    --all-types) all_types=1; shift ;;
    --embed) embed=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die_usage "unknown option '$1'" ;;
    *) die_usage "unexpected argument '$1' (the output directory is --out DIR)" ;;
  esac
done
[[ -n $out ]] || die_usage "--out needs a non-empty directory"
if [[ -n $threads && ! $threads =~ ^[1-9][0-9]*$ ]]; then
  die_usage "--threads takes a positive integer, not '$threads'"
fi
if [[ -n $reps_all && ! $reps_all =~ ^[1-9][0-9]*$ ]]; then
  die_usage "--reps takes a positive integer, not '$reps_all'"
fi
for v in "--embed-batch:$embed_batch" "--embed-texts:$embed_texts"; do
  [[ ${v#*:} =~ ^[1-9][0-9]*$ ]] || die_usage "${v%%:*} takes a positive integer, not '${v#*:}'"
done
[[ $embed_lengths =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  die_usage "--embed-lengths takes lengths such as 16,64, not '$embed_lengths'"
if [[ -n $only_cases ]]; then
  regex_rc=0
  [[ "" =~ $only_cases ]] || regex_rc=$?
  ((regex_rc != 2)) || die_usage "--cases takes a bash regular expression, not '$only_cases'"
fi
[[ -x $qkv ]] || { echo "speed_table.sh: no qkv binary at $qkv (build it first; this script builds nothing)" >&2; exit 1; }

if [[ -n $isa ]]; then
  export QKV_ISA=$isa
  # qkv names the levels it knows and those this CPU runs when it refuses one.
  isa_err=$("$qkv" info --cpu 2>&1 >/dev/null) || { echo "speed_table.sh: --isa $isa: $isa_err" >&2; exit 2; }
fi
cpu_info=$("$qkv" info --cpu)
if [[ -z $threads ]]; then
  threads=$(sed -n 's/^threads: \([0-9][0-9]*\) by default.*/\1/p' <<<"$cpu_info")
  [[ -n $threads ]] || { echo "speed_table.sh: cannot read qkv's default thread count from 'qkv info --cpu'; pass --threads" >&2; exit 1; }
fi

if ((embed)); then
  # shellcheck source=speed_table_embed.sh
  source scripts/speed_table_embed.sh
  exit $?
fi

use_llama=0
if [[ -n $llama_dir ]]; then
  missing=()
  for b in llama-bench llama-batched-bench; do
    [[ -x $llama_dir/$b ]] || missing+=("$llama_dir/$b")
  done
  if ((${#missing[@]} > 0)); then
    echo "speed_table.sh: missing ${missing[*]}: printing qkv's rows alone" >&2
  else
    use_llama=1
    llama_dir=$(cd "$llama_dir" && pwd)
  fi
fi
# name | make-model shape | type | prefill length | reps | 16-sequence row (1/0)
cases=(
  "143M-f16|143M|f16|512|5|1"
  "143M-q4_0|143M|q4_0|512|5|1"
  "143M-q4_k_m|143M|q4_k_m|512|5|1"
  "1.1B-q8_0|1.1B|q8_0|256|3|0"
  "1.1B-q4_k_m|1.1B|q4_k_m|256|3|1"
)
if ((all_types)); then
  cases=(
    "143M-f16|143M|f16|512|5|1"
    "143M-q8_0|143M|q8_0|512|5|1"
    "143M-q4_0|143M|q4_0|512|5|1"
    "143M-q4_k_m|143M|q4_k_m|512|5|1"
    "1.1B-f16|1.1B|f16|256|3|1"
    "1.1B-q8_0|1.1B|q8_0|256|3|1"
    "1.1B-q4_0|1.1B|q4_0|256|3|1"
    "1.1B-q4_k_m|1.1B|q4_k_m|256|3|1"
  )
fi
if [[ -n $only_cases ]]; then
  names=""
  for c in "${cases[@]}"; do
    if [[ ${c%%|*} =~ $only_cases ]]; then names+=" ${c%%|*}"; fi
  done
  [[ -n $names ]] || die_usage "--cases '$only_cases' matches none of the table's cases ($(IFS=' '; echo "${cases[*]%%|*}")); --all-types lists all 8"
fi
mkdir -p "$out"
steps=32       # decode steps: llama-bench -n, llama-batched-bench -ntg
batch_depth=128  # positions before the batched steps: llama-batched-bench -npp
batch=16       # sequences stepping together: llama-batched-bench -npl
failed=0
selected=()
for c in "${cases[@]}"; do
  IFS='|' read -r name shape type plen reps has_batch <<<"$c"
  if ((quick)) && [[ $shape != 143M ]]; then continue; fi
  if [[ -n $only_cases && ! $name =~ $only_cases ]]; then continue; fi
  reps=${reps_all:-$reps}
  selected+=("$name|$shape|$type|$plen|$reps|$has_batch")
  model=$out/$name.gguf
  if [[ ! -f $model ]]; then
    echo "== $name: writing $model" >&2
    "$qkv" make-model "$shape" --type "$type" -o "$model.tmp" >&2
    mv "$model.tmp" "$model"
  fi
  batches=none
  ((has_batch)) && batches=1,$batch
  echo "== $name: qkv bench" >&2
  rm -f "$out/$name.qkv.json" "$out/$name.llama-bench.json" "$out/$name.llama-batched-bench.jsonl" \
    "$out/$name.llama-batched-bench.out"
  "$qkv" bench -m "$model" --prompt-lengths "$plen" --depths 0 --batches "$batches" \
    --steps "$steps" --batch-depth "$batch_depth" --reps "$reps" -t "$threads" -q \
    --json-out "$out/$name.qkv.json" >&2
  ((use_llama)) || continue

  echo "== $name: llama-bench" >&2
  if ! LD_LIBRARY_PATH=$llama_dir "$llama_dir/llama-bench" -m "$model" -p "$plen" -n "$steps" \
      -t "$threads" -r "$reps" -o json >"$out/$name.llama-bench.json" 2>"$out/$name.llama-bench.log"; then
    echo "speed_table.sh: llama-bench failed on $name: see $out/$name.llama-bench.log" >&2
    rm -f "$out/$name.llama-bench.json"
    failed=1
  fi
  ((has_batch)) || continue
  # One S_TG per process: as many processes as qkv's reps give a median and range.
  # -c holds every sequence's own prompt and generation (is_pp_shared off);
  # llama-batched-bench skips a case that does not fit, printing nothing for it.
  echo "== $name: llama-batched-bench x$reps" >&2
  : >"$out/$name.llama-batched-bench.log"
  : >"$out/$name.llama-batched-bench.out"
  for ((r = 0; r < reps; r++)); do
    if ! LD_LIBRARY_PATH=$llama_dir "$llama_dir/llama-batched-bench" -m "$model" \
        -c $((batch * (batch_depth + steps))) -b 2048 -ub 512 -npp "$batch_depth" -ntg "$steps" \
        -npl "$batch" -t "$threads" --output-format jsonl \
        >>"$out/$name.llama-batched-bench.out" 2>>"$out/$name.llama-batched-bench.log"; then
      echo "speed_table.sh: llama-batched-bench failed on $name: see $out/$name.llama-batched-bench.log" >&2
      failed=1
      break
    fi
  done
  # stdout also carries blank lines and the perf summary: keep the JSON lines.
  grep '^{' "$out/$name.llama-batched-bench.out" >"$out/$name.llama-batched-bench.jsonl" || true
  rm -f "$out/$name.llama-batched-bench.out"
done

{
  printf '%s\n' "$cpu_info" | sed -n '1p;/^cpu:/p'
  sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1
} >"$out/host.txt"
python3 - "$out" "$threads" "$use_llama" "$llama_dir" "$steps" "$batch_depth" "$batch" \
  "${selected[@]}" <<'PY' || failed=1
import datetime, json, os, statistics, sys

out, threads, use_llama, llama_dir = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
steps, depth, batch = (int(a) for a in sys.argv[5:8])
cases = [c.split("|") for c in sys.argv[8:]]
missing = False

def spread(values):
    return statistics.median(values), min(values), max(values)

def fmt(m):
    return f"{m[0]:.1f} [{m[1]:.1f}..{m[2]:.1f}]"

def load(path):
    try:
        with open(path) as f:
            return json.load(f) if path.endswith(".json") else [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError) as e:
        print(f"speed_table.sh: cannot read {path}: {e}", file=sys.stderr)
        return None

def llama_bench(runs, n_prompt, n_gen):
    r = next((r for r in runs or [] if r["n_prompt"] == n_prompt and r["n_gen"] == n_gen), None)
    return spread(r["samples_ts"]) if r and r["samples_ts"] else None

def llama_batched(lines):
    ts = [l["speed_tg"] for l in lines or []
          if l["pp"] == depth and l["tg"] == steps and l["pl"] == batch]
    return spread(ts) if ts else None

host = open(os.path.join(out, "host.txt")).read().split("\n")
host = "; ".join(h.strip() for h in host if h.strip())
line = f"{datetime.date.today().isoformat()}, host: {host}; {threads} threads"
build = ""
rows = []
for name, shape, wtype, plen, reps, has_batch in cases:
    d = load(os.path.join(out, f"{name}.qkv.json"))
    if d is None:
        missing = True
        continue
    lb = load(os.path.join(out, f"{name}.llama-bench.json")) if use_llama else None
    bb = load(os.path.join(out, f"{name}.llama-batched-bench.jsonl")) if use_llama and has_batch == "1" else None
    if lb and not build:
        build = f"build {lb[0]['build_commit']} ({lb[0]['build_number']}), cpu_info {lb[0]['cpu_info']!r}"
    specs = [("prefill", int(plen), 0, 1), ("decode", steps, 0, 1)]
    if has_batch == "1":
        specs.append(("batch", steps, depth, batch))
    for kind, tokens, dep, b in specs:
        r = next((r for r in d["rows"] if r["kind"] == kind and r["tokens"] == tokens
                  and r["depth"] == dep and r["batch"] == b), None)
        if r is None:
            print(f"speed_table.sh: {name}: no {kind} row in qkv bench's JSON", file=sys.stderr)
            missing = True
            continue
        t = r["tokens_per_s"]
        q = (t["median"], t["min"], t["max"])
        def pct(v, what):
            return f"{v:.0f}% {what}" if v is not None else "- (no probe)"
        if kind == "prefill":
            test, limit = f"prefill {tokens}", pct(r["fma_peak_pct"], "FMA peak")
            ref = llama_bench(lb, tokens, 0)
        elif kind == "decode":
            test, limit = "decode", pct(r["dram_bw_pct_paired"], "paired read")
            ref = llama_bench(lb, 0, tokens)
        else:
            test, limit = f"{b} sequences", f"{r['speedup_vs_batch1']:.2f}x one"
            ref = llama_batched(bb)
        cells = [name, test, fmt(q), limit]
        if use_llama:
            if ref is None:
                missing = True
                print(f"speed_table.sh: {name} {test}: no llama.cpp figure", file=sys.stderr)
            cells += [fmt(ref), f"{q[0] / ref[0]:.2f}x"] if ref else ["-", "-"]
        rows.append(cells)

if use_llama:
    line += f"; llama.cpp {llama_dir}, {build or 'build unknown'}"
print(line)
print()
note = "Median [min..max] over each case's reps (" + ", ".join(f"{c[0]}: {c[4]}" for c in cases) + ")"
if use_llama:
    note += ("; llama.cpp's from llama-bench -r, its 16-sequence rows the S_TG of one"
             " llama-batched-bench process per rep")
print(note + ".")
print()
head = ["model", "test", "qkv tok/s (median [min..max])", "of the machine"]
if use_llama:
    head += ["llama.cpp tok/s (same run)", "qkv / llama.cpp"]
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
