#!/usr/bin/env bash
# Installs whatever tapegrad needs that is missing (Debian 12 packages only), then configures and
# builds into build/. Safe to run again: installed packages are skipped, the build is incremental.
#   scripts/setup.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++                           # toolchain
  libxtensor-dev xtl-dev libxsimd-dev libtbb-dev  # tensors, SIMD, threads
  libzip-dev                                      # .npz checkpoints
  libcli11-dev libfmt-dev nlohmann-json3-dev      # command line, formatting, config files
  libgtest-dev libbenchmark-dev                   # tests and benchmarks
  python3-numpy                                   # tests: .npz files written by NumPy
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
