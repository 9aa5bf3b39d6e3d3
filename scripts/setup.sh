#!/usr/bin/env bash
# Installs the Debian 12 packages qkv builds with. Idempotent: installs only what is missing.
set -euo pipefail
# ocl-icd-opencl-dev: Debian's oneDNN is built with an OpenCL GPU runtime, so its CMake
# config calls find_package(OpenCL REQUIRED); libdnnl-dev only recommends the package.
packages=(cmake g++ make pkg-config libhwy-dev libdnnl-dev ocl-icd-opencl-dev doctest-dev libbenchmark-dev
          libpcre2-dev libutf8proc-dev nlohmann-json3-dev)
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
