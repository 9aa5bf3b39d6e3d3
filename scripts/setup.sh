#!/usr/bin/env bash
# Installs the Debian 12 packages qkv builds with (with --tests, also what its tests
# use). Idempotent: installs only what is missing.
set -euo pipefail
# ocl-icd-opencl-dev: Debian's oneDNN is built with an OpenCL GPU runtime, so its CMake
# config calls find_package(OpenCL REQUIRED); libdnnl-dev only recommends the package.
# libcpp-httplib-dev, nlohmann-json3-dev: HTTP and JSON of qkv serve; nginx, curl, nodejs,
# npm: its tests (the load balancer in front of two replicas, raw SSE, the OpenAI client).
# libpcre2-dev, libutf8proc-dev: tokenizer pre-splits and Unicode normalization.
packages=(cmake g++ make pkg-config libhwy-dev libdnnl-dev ocl-icd-opencl-dev doctest-dev libbenchmark-dev
          libcpp-httplib-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev nginx curl)
# Node from another source (e.g. NodeSource, which bundles npm) is used as it is.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
# --tests: also the tools only the tests use: Python's jinja2 (the chat-template
# oracle), Chromium (renders the attention-map SVG headless), tmux (qkv chat in a
# terminal), clang-14 and its runtime libraries (libFuzzer and the sanitizers of
# tests/fuzz, scripts/fuzz.sh; LLVM's OpenMP for the clang-14 build of the tree).
[ "${1:-}" = --tests ] && packages+=(python3-jinja2 chromium tmux clang-14 libclang-rt-14-dev libomp-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
