#!/usr/bin/env bash
# Sets up, builds and runs every qkv test: the Release build under CTest, then the
# same suites built with AddressSanitizer + UBSan, the threaded API test under
# ThreadSanitizer, and the kernels compiled for Highway's SCALAR target only.
# QKV_TEST_QUICK=1 runs only the first stage.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

stage() { echo; echo "=== $*"; }

stage "Release build + all tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

[ "${QKV_TEST_QUICK:-0}" = 1 ] && exit 0

stage "AddressSanitizer + UBSan build: file parsing, tokenizer, kernels"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_SANITIZE=ON -DQKV_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L asan

stage "Kernels compiled for the SCALAR target only"
cmake -S . -B build-scalar -DCMAKE_BUILD_TYPE=Release -DQKV_SCALAR_ONLY=ON -DQKV_BUILD_BENCH=OFF >/dev/null
cmake --build build-scalar -j"$jobs"
ctest --test-dir build-scalar --output-on-failure -j"$jobs" -L kernels
