#!/usr/bin/env bash
# Outputs on a full disk: every file qkv writes (make-model's GGUF, qkv
# perplexity's KL-divergence base, the SVG of qkv attention and qkv plot,
# qkv bench --json-out, qkv detokenize -o) goes through a temporary file renamed at the end, so on
# a 64 KiB tmpfs that fills up the command fails naming the reason and leaves
# no file, partial or temporary, behind.
# Usage: cli_disk_full.sh QKV. Mounts the tmpfs in a private mount namespace
# (unshare -rm, or as root); skips (exit 0, with a message) where neither works.
set -u
qkv=$1
if [[ ${QKV_IN_MOUNT_NS:-0} != 1 ]]; then
  for runner in "unshare -rm" "unshare -m"; do
    if $runner true 2>/dev/null; then
      QKV_IN_MOUNT_NS=1 exec $runner bash "$0" "$@"
    fi
  done
  echo "SKIPPED: no private mount namespace (unshare -rm) for a small tmpfs"
  exit 0
fi
tmp=$(mktemp -d)
fs=$tmp/full
mkdir -p "$fs"
if ! mount -t tmpfs -o size=64k tmpfs "$fs" 2>/dev/null; then
  echo "SKIPPED: cannot mount a tmpfs"
  rm -rf "$tmp"
  exit 0
fi
trap 'umount "$fs"; rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# CMD... must fail with "No space left on device" in its error, leaving $fs
# holding only the files named in $keep.
keep=""
expect_full() {
  local what=$1
  shift
  if "$@" > "$tmp/out" 2> "$tmp/err"; then
    fail "$what: succeeded on a full disk"
  elif ! grep -q "No space left on device" "$tmp/err"; then
    fail "$what: the error does not name the reason: $(cat "$tmp/err")"
  fi
  local left
  left=$(cd "$fs" && ls -A | grep -vx "$keep" || true)
  [[ -z $left ]] || fail "$what: left $left behind"
  echo "ok: $what: $(head -c 200 "$tmp/err")"
}

# A model bigger than the whole file system (about 300 KiB into 64 KiB).
expect_full "make-model" "$qkv" make-model tiny -q -o "$fs/tiny.gguf"
"$qkv" make-model tiny -q -o "$tmp/tiny.gguf" || fail "make-model into a normal directory"
# The other outputs are small: the disk is filled first, to the last page.
head -c 65536 /dev/zero > "$fs/filler" 2>/dev/null
keep=filler
printf 'Once upon a time there was a tiny model that read its own files.\n' > "$tmp/text"
expect_full "perplexity --kl-divergence-base" "$qkv" perplexity -m "$tmp/tiny.gguf" -f "$tmp/text" -c 8 --chunks 1 \
  --kl-divergence-base "$fs/base.kld"
"$qkv" bench --synthetic tiny --no-probe --prompt-lengths 8 --depths 0 --batches none --steps 2 --reps 1 \
  --warmup 0 -t 1 -q --json > "$tmp/bench.json" 2>/dev/null || fail "bench --json"
expect_full "bench --json-out" "$qkv" bench --synthetic tiny --no-probe --prompt-lengths 8 --depths 0 \
  --batches none --steps 2 --reps 1 --warmup 0 -t 1 -q --json-out "$fs/bench.json"
expect_full "attention -o" "$qkv" attention -m "$tmp/tiny.gguf" -p "Once upon a time" -o "$fs/map.svg"
expect_full "plot" "$qkv" plot "$tmp/bench.json" -o "$fs/chart.svg"
expect_full "detokenize -o" "$qkv" detokenize -m "$tmp/tiny.gguf" -o "$fs/text.txt" 300 301 302
[[ $failures -eq 0 ]] || { echo "$failures failures"; exit 1; }
echo "every output on a full disk failed cleanly"
