#!/usr/bin/env bash
# Installs the Debian 12 packages qkv builds with (with --tests, also what its tests
# use). Idempotent: installs only what is missing.
set -euo pipefail
# ocl-icd-opencl-dev: Debian's oneDNN is built with an OpenCL GPU runtime, so its CMake
# config calls find_package(OpenCL REQUIRED); libdnnl-dev only recommends the package.
# libcpp-httplib-dev, nlohmann-json3-dev: HTTP and JSON of qkv serve; nginx, curl, nodejs,
# npm: its tests (the load balancer in front of two replicas, raw SSE, the OpenAI client).
# libpcre2-dev, libutf8proc-dev: tokenizer pre-splits and Unicode normalization.
# libcurl4-openssl-dev, libssl-dev: qkv pull's HTTPS downloads and their sha256.
# libnuma-dev: NUMA nodes and weight placement for --numa (optional: QKV_NUMA, third_party/numa.cmake).
packages=(cmake g++ make pkg-config libhwy-dev libdnnl-dev ocl-icd-opencl-dev doctest-dev libbenchmark-dev
          libcpp-httplib-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev nginx curl libcurl4-openssl-dev libssl-dev
          libnuma-dev)
# Node from another source (e.g. NodeSource, which bundles npm) is used as it is.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
# --tests: also the tools only the tests use: Python's jinja2 (the chat-template
# oracle), Chromium (renders the attention-map SVG headless), tmux (qkv chat in a
# terminal), clang-14 and its runtime libraries (libFuzzer and the sanitizers of
# tests/fuzz, scripts/fuzz.sh; LLVM's OpenMP for the clang-14 build of the tree), openssl
# (the self-signed certificate of tests/cli_pull.sh's HTTPS hub).
[ "${1:-}" = --tests ] && packages+=(python3-jinja2 chromium tmux clang-14 libclang-rt-14-dev libomp-14-dev openssl)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# --tests on amd64: the aarch64 cross build run under qemu-user (scripts/test.sh's
# aarch64 stage, cmake/toolchain-aarch64.cmake): the cross compiler, qemu-user and
# the arm64 multiarch builds of the libraries qkv links. libdnnl-dev:arm64 cannot be
# installed beside libdnnl-dev:amd64 (the two ship different dnnl_config.h), so that
# build goes without oneDNN. If these cannot install, that stage skips, saying why.
if [ "${1:-}" = --tests ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
  # libgomp1:arm64: the OpenMP runtime where qemu-aarch64's loader looks (the cross
  # toolchain's copy sits in /usr/aarch64-linux-gnu/lib, outside its search path).
  cross=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64
         libcpp-httplib-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64 libgomp1:arm64)
  cross_missing=()
  for p in "${cross[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || cross_missing+=("$p")
  done
  if [ ${#cross_missing[@]} -gt 0 ]; then
    echo "setup: installing the aarch64 cross packages ${cross_missing[*]}"
    $SUDO dpkg --add-architecture arm64 && $SUDO apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${cross_missing[@]}" ||
      echo "setup: the aarch64 cross packages did not install; scripts/test.sh will skip its aarch64 stage" >&2
  fi
fi
# A package counts as present only in the machine's own architecture (or
# "all"): once arm64 is added, an unqualified query also finds the cross
# build's libhwy-dev:arm64 and the amd64 one would never be installed.
native=$(dpkg --print-architecture)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status} ${Architecture}\n' "$p" 2>/dev/null | grep -qE "^install ok installed ($native|all)$" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
