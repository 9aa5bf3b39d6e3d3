#!/usr/bin/env bash
# qkv attention on stories260K: one heatmap cell per causal (query, key) pair per
# panel, GQA frames, --json maps, bad flags; then the SVG rendered by headless
# Chromium (Debian's chromium) must give a non-blank screenshot.
# Usage: cli_attention.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared model.
set -u
qkv=$1
model=$2/models/stories260K.gguf
if [[ ! -f $model ]]; then
  echo "SKIPPED: $model is absent"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
prompt="Once upon a time, there was a little girl"
n=$("$qkv" tokenize -m "$model" "$prompt" | wc -w)

"$qkv" attention -m "$model" -p "$prompt" --layer 1 -o "$tmp/map.svg" || fail "attention exited $?"
[[ $(head -c 5 "$tmp/map.svg") == "<?xml" && $(tail -1 "$tmp/map.svg") == "</svg>" ]] || fail "not an SVG document"
panels=$(grep -c '<g class="heatmap"' "$tmp/map.svg")
[[ $panels == 8 ]] || fail "8 head panels expected, got $panels"
cells=$(grep -c '<rect x="[0-9.]*" y="[0-9.]*" width="[0-9.]*" height="[0-9.]*" fill="#' "$tmp/map.svg")
[[ $cells == $((8 * n * (n + 1) / 2)) ]] || fail "$cells cells, want 8 x $n x ($n + 1) / 2"
[[ $(grep -c 'class="group"' "$tmp/map.svg") == 4 ]] || fail "4 GQA group frames expected"
grep -q '>▁Once<\|>·Once<' "$tmp/map.svg" || fail "token pieces missing from the labels"

json=$("$qkv" attention -m "$model" -p "$prompt" --layer all --head 3 --json) || fail "--json exited $?"
[[ $(grep -o '"layer": ' <<<"$json" | wc -l) == 5 ]] || fail "--layer all --head 3: 5 maps expected"
[[ $json == *'"pieces": ["<s>", "▁Once"'* ]] || fail "--json pieces: ${json:0:200}"

"$qkv" attention -m "$model" -p "$prompt" --layer 9 --json >/dev/null 2>&1
[[ $? == 1 ]] || fail "--layer 9 should be an error"
"$qkv" attention -m "$model" -p "$prompt" >/dev/null 2>&1
[[ $? == 2 ]] || fail "no -o and no --json should be a usage error"

chrome=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chrome ]]; then
  echo "SKIPPED: headless render (chromium is not installed; apt-get install chromium)"
else
  timeout 60 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$tmp/profile" --window-size=1400,500 \
    --screenshot="$tmp/map.png" "file://$tmp/map.svg" >/dev/null 2>&1
  if [[ ! -s $tmp/map.png ]]; then
    fail "chromium wrote no screenshot"
  else
    # A blank page compresses to a few KB; the heatmaps do not.
    size=$(stat -c %s "$tmp/map.png")
    [[ $(head -c 8 "$tmp/map.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "screenshot is not a PNG"
    [[ $size -gt 20000 ]] || fail "screenshot of $size bytes looks blank"
    echo "chromium rendered the SVG: $size-byte screenshot"
  fi
fi
if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "cli_attention: all checks passed"
