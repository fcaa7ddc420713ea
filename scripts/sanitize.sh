#!/usr/bin/env bash
# Builds and runs tests under sanitizers:
#   scripts/sanitize.sh address [TARGET...]   # ASan + UBSan  (build-asan/)
#   scripts/sanitize.sh thread [TARGET...]    # TSan, for the TBB-parallel kernels (build-tsan/)
# TARGETs: GoogleTest binaries (test_autograd, test_nn, test_models, test_examples, test_dist,
# test_dist_cli) and `fuzz_replay`, every fuzz.replay.* test of tests/fuzz (through ctest). Only
# those are built. Without a TARGET: the library, the examples and every test binary are built,
# and every GoogleTest binary runs (the whole suite; no fuzz replay).
# Options (before the targets):
#   --filter F     GoogleTest filter for the binaries, e.g. --filter 'Determinism*:Gemm*'
#   --keep-going   run the remaining targets after one fails (default: stop at the first failure)
# A sanitizer halts its binary at the first report; the script then stops and exits non-zero.
# The last line counts the tests: "sanitize.sh address: N tests passed, ...".
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address}
[ $# -gt 0 ] && shift
usage="usage: scripts/sanitize.sh address|thread [--filter GTEST_FILTER] [--keep-going] [TARGET...]"
case "$kind" in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
filter=""
keep_going=0
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; filter=$2; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
targets=("$@")
for t in "${targets[@]}"; do
  [[ $t == fuzz_replay || $t =~ ^test_[a-z_]+$ ]] || { echo "sanitize.sh: unknown target '$t'" >&2; echo "$usage" >&2; exit 2; }
done

scripts/setup.sh --packages-only test  # dependencies only; the build is below
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_SANITIZE="$kind" \
  -DTG_BUILD_BENCH=OFF -DTG_BUILD_EXAMPLES=ON "${launcher[@]}" >/dev/null

binaries=()  # GoogleTest binaries to run, as paths
replay=0
build=()     # cmake --build targets (none: all)
for t in "${targets[@]}"; do
  if [ "$t" = fuzz_replay ]; then
    replay=1
    # Every fuzz_replay_<target> executable the build defines (tests/fuzz/CMakeLists.txt).
    mapfile -t fuzz < <(ninja -C "$dir" -t targets all | sed -nE 's/^(fuzz_replay_[A-Za-z0-9_]+): phony$/\1/p' | sort -u)
    [ ${#fuzz[@]} -gt 0 ] || { echo "sanitize.sh: no fuzz_replay_* target in $dir" >&2; exit 1; }
    build+=("${fuzz[@]}")
  else
    build+=("$t")
    binaries+=("$dir/bin/$t")
  fi
done
start=$SECONDS
if [ ${#build[@]} -gt 0 ]; then
  cmake --build "$dir" -j"$(nproc)" --target "${build[@]}"
else
  cmake --build "$dir" -j"$(nproc)"
  binaries=("$dir"/bin/test_*)
fi
echo "sanitize.sh $kind: built in $((SECONDS - start)) s" >&2

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

logs=$dir/sanitize-logs
rm -rf "$logs"
mkdir -p "$logs"
passed=0 skipped=0 failed=0 ran=() failures=()
# What a run's log says: GoogleTest's counts (with --gtest_brief=1 it prints the passed and skipped
# totals and one "[  FAILED  ] Suite.Test (N ms)" line per failed test), and whether a sanitizer
# reported.
count() {  # log
  local n
  n=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\.$/\1/p' "$1" | tail -n1); passed=$((passed + ${n:-0}))
  n=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?(\.|, listed below:)$/\1/p' "$1" | tail -n1); skipped=$((skipped + ${n:-0}))
  n=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$1" || true); failed=$((failed + n))
}
report_in() {  # log
  grep -qE '^(==[0-9]+==ERROR: [A-Za-z]+Sanitizer|WARNING: ThreadSanitizer|SUMMARY: [A-Za-z]+Sanitizer)|runtime error: ' "$1"
}
fail() {  # name log status
  local why="exit status $3"
  report_in "$2" && why="$why, a sanitizer report (in $2)"
  failures+=("$1 ($why)")
}
status=0
for t in "${binaries[@]}"; do
  name=$(basename "$t")
  echo "== $t" >&2
  launch=()
  case "$name" in
    test_dist) launch=(env "ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0" "${mpi[@]}") ;;
    test_dist_cli) launch=(env "ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0") ;;
  esac
  log=$logs/$name.log
  set +e
  "${launch[@]}" "$t" ${filter:+--gtest_filter="$filter"} --gtest_brief=1 2>&1 | tee "$log"
  s=${PIPESTATUS[0]}
  set -e
  ran+=("$name")
  count "$log"
  if [ "$s" -ne 0 ]; then
    status=1
    fail "$name" "$log" "$s"
    [ "$keep_going" -eq 1 ] || break
  fi
done
replays=0
if [ "$replay" -eq 1 ] && { [ "$status" -eq 0 ] || [ "$keep_going" -eq 1 ]; }; then
  echo "== fuzz.replay.* (ctest)" >&2
  log=$logs/fuzz_replay.log
  set +e
  (cd "$dir" && ctest -R '^fuzz\.replay\.' --output-on-failure -j"$(nproc)" --timeout 600) 2>&1 | tee "$log"
  s=${PIPESTATUS[0]}
  set -e
  ran+=(fuzz_replay)
  replays=$(sed -nE 's/^.*tests passed, ([0-9]+) tests? failed out of ([0-9]+)$/\2/p' "$log" | tail -n1)
  replay_failed=$(sed -nE 's/^.*tests passed, ([0-9]+) tests? failed out of ([0-9]+)$/\1/p' "$log" | tail -n1)
  replays=${replays:-0}
  passed=$((passed + replays - ${replay_failed:-0}))
  failed=$((failed + ${replay_failed:-0}))
  if [ "$s" -ne 0 ] || [ "$replays" -eq 0 ]; then
    status=1
    fail fuzz_replay "$log" "$s"
  fi
fi

summary="sanitize.sh $kind: $passed tests passed, $skipped skipped, $failed failed"
summary+=" (${ran[*]:-nothing}; $replays of them fuzz replays), $((SECONDS - start)) s built and run"
if [ "$status" -eq 0 ]; then
  echo "$summary; no sanitizer report"
else
  not_run=$((${#binaries[@]} + replay - ${#ran[@]}))
  [ "$not_run" -gt 0 ] && summary+="; not run after the failure: $not_run target(s)"
  echo "$summary; FAILED: ${failures[*]}"
fi
exit $status
