#!/usr/bin/env bash
# Installs the Debian 12 packages a purpose needs (skipping installed ones), configures a Release
# build in build/ and builds that purpose's targets, showing one progress line (the full compiler
# log goes to build/build.log). Safe to run again: the build is incremental, and switching purpose
# does not recompile the library.
#   scripts/setup.sh [--packages-only] main|test|bench|fuzz [extra cmake -D options...]
#     main   the library and the `bahdanau` CLI (what scripts/run.sh needs)
#     test   everything the test suite runs: library, examples, tests, benchmarks (smoke-tested)
#     bench  the same plus the benchmark references (OpenBLAS, PyTorch, LibTorch); LibTorch is
#            never a dependency of the library or the tests, only of bench/libtorch
#     fuzz   clang and libFuzzer; the fuzz targets of tests/fuzz, instrumented, in build-fuzz/
#            (what scripts/fuzz.sh runs)
# Extra cmake options go to the configure step, e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache.
# --packages-only installs the purpose's packages and stops (scripts/sanitize.sh builds elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."

packages_only=0
if [ "${1:-}" = "--packages-only" ]; then packages_only=1; shift; fi

purpose=${1:-test}
[ $# -gt 0 ] && shift

# ---- packages, by purpose -----------------------------------------------------------------------
MAIN_PACKAGES=(
  cmake ninja-build g++                           # toolchain
  libxtensor-dev xtl-dev libxsimd-dev libtbb-dev  # tensors, SIMD, threads
  libzip-dev                                      # .npz checkpoints
  libssl-dev                                      # SHA-256 of checkpoint files (manifest.json)
  libcli11-dev nlohmann-json3-dev                 # command line, config files
  libsentencepiece-dev                            # subword vocabularies (bahdanau train --subword)
  libopenmpi-dev openmpi-bin                      # tg::dist: data-parallel training under mpirun
)
TEST_PACKAGES=(
  libgtest-dev libbenchmark-dev                   # tests and benchmarks (the suite smoke-tests them)
  python3-numpy                                   # tests: .npz files written by NumPy
)
BENCH_PACKAGES=(
  libopenblas-dev                                 # the GEMM yardstick
  python3-torch libopenblas0-pthread              # the PyTorch reference, on OpenBLAS
  python3-sentencepiece                           # scripts/pytorch_rnnsearch.py decodes its dev translations
  libtorch-dev                                    # the LibTorch C++ references (bench/libtorch), on the same OpenBLAS
)

FUZZ_PACKAGES=(
  clang                                           # TG_BUILD_FUZZ needs clang
  libclang-rt-14-dev                              # libFuzzer and the sanitizer runtimes (only recommended by clang)
)

build=build
configure=()
case "$purpose" in
  main)  packages=("${MAIN_PACKAGES[@]}"); tests=OFF; bench=OFF; targets=(bahdanau) ;;
  test)  packages=("${MAIN_PACKAGES[@]}" "${TEST_PACKAGES[@]}"); tests=ON; bench=ON; targets=(all) ;;
  bench) packages=("${MAIN_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${BENCH_PACKAGES[@]}"); tests=ON; bench=ON; targets=(all) ;;
  fuzz)  packages=("${MAIN_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}"); tests=OFF; bench=OFF
         build=build-fuzz; targets=(fuzz_npy fuzz_npz fuzz_config_json fuzz_vocab fuzz_pairs_tsv fuzz_csv_log fuzz_checkpoint fuzz_tokenizer fuzz_cli)
         configure=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
                    -DTG_BUILD_FUZZ=ON -DTG_BUILD_EXAMPLES=OFF) ;;
  *) echo "usage: scripts/setup.sh [--packages-only] main|test|bench|fuzz [cmake options...]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$packages_only" -eq 1 ] && exit 0

# ---- configure and build ------------------------------------------------------------------------
mkdir -p "$build"
log=$build/build.log
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTG_BUILD_TESTS=$tests -DTG_BUILD_BENCH=$bench "${configure[@]}" "$@" \
     >"$log" 2>&1; then
  echo "setup: configuring failed; the end of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi

# Ninja prints "[done/total] ..." per step; show only that count, on one line on a terminal.
progress() {
  local line last=""
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
      last="building ($purpose): ${BASH_REMATCH[1]}/${BASH_REMATCH[2]}"
      if [ -t 2 ]; then printf '\r%s' "$last" >&2; fi
    fi
  done
  if [ -t 2 ] && [ -n "$last" ]; then printf '\n' >&2; elif [ -n "$last" ]; then echo "$last" >&2; fi
}
set +e
cmake --build "$build" --target "${targets[@]}" -- -j"$(nproc)" 2>&1 | progress
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "setup: the build failed; the first error in $log:" >&2
  grep -m1 -A20 -E "error|FAILED" "$log" >&2 || tail -n 30 "$log" >&2
  exit "$status"
fi
