#!/usr/bin/env bash
# Builds and runs the test suite under sanitizers:
#   scripts/sanitize.sh address   # ASan + UBSan  (build-asan/)
#   scripts/sanitize.sh thread    # TSan, for the TBB-parallel kernels (build-tsan/)
# Optional GoogleTest filter as second argument, e.g. 'Determinism*:Gemm*'.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address}
filter=${2:-}
case "$kind" in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "usage: scripts/sanitize.sh address|thread [gtest-filter]" >&2; exit 2 ;;
esac
scripts/setup.sh --packages-only test  # dependencies only; the build is below
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_SANITIZE="$kind" \
  -DTG_BUILD_BENCH=OFF -DTG_BUILD_EXAMPLES=ON "${launcher[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Open MPI's blocks left at exit: see scripts/lsan.supp (MPI binaries only unwind fully, below).
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
# TBB's internals, invisible to TSan in Debian's uninstrumented libtbb: see scripts/tsan.supp.
export TSAN_OPTIONS="halt_on_error=1 history_size=7 suppressions=$PWD/scripts/tsan.supp"
# test_dist needs two ranks; test_dist_cli starts mpirun itself (tests/CMakeLists.txt has the flags).
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --oversubscribe --allow-run-as-root -np 2)
export TG_DIST_TIMEOUT=60 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
for t in "$dir"/bin/test_*; do
  echo "== $t" >&2
  launch=()
  case "$(basename "$t")" in
    test_dist) launch=(env "ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0" "${mpi[@]}") ;;
    test_dist_cli) launch=(env "ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0") ;;
  esac
  "${launch[@]}" "$t" ${filter:+--gtest_filter="$filter"} --gtest_brief=1 || status=1
done
exit $status
