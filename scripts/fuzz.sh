#!/usr/bin/env bash
# Runs a libFuzzer target of tests/fuzz/ (see docs/reliability.md, "Fuzzing").
#   scripts/fuzz.sh TARGET SECONDS [extra libFuzzer args...]
#   scripts/fuzz.sh all SECONDS [extra libFuzzer args...]   every target in turn
# Targets: npy npz config_json vocab pairs_tsv csv_log checkpoint tokenizer.
# Configures build-fuzz/ with clang and TG_BUILD_FUZZ=ON (scripts/setup.sh fuzz installs the
# packages), builds the target, and fuzzes a fresh copy of tests/fuzz/corpus/TARGET for SECONDS
# with ASan+UBSan, a 2 GB RSS and malloc limit and a 10 s per-input timeout. Prints the total
# executions; exits non-zero on a finding, leaving the input in build-fuzz/fuzz-work/TARGET/
# (crash-*, leak-*, timeout-*, oom-*) and libFuzzer's log beside it. One fuzzer at a time, one
# process: no -jobs/-workers.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(npy npz config_json vocab pairs_tsv csv_log checkpoint tokenizer cli)
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer args...]   (targets: ${TARGETS[*]})" >&2
  exit 2
fi
which=$1 seconds=$2
shift 2
if [ "$which" = all ]; then
  targets=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $which "* ]]; then
  targets=("$which")
else
  echo "fuzz.sh: unknown target '$which' (targets: ${TARGETS[*]} or all)" >&2
  exit 2
fi
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }

build=build-fuzz
if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_BUILD_FUZZ=ON \
    -DTG_BUILD_TESTS=OFF -DTG_BUILD_BENCH=OFF -DTG_BUILD_EXAMPLES=OFF "${launcher[@]}" >/dev/null
fi
cmake --build "$build" --target "${targets[@]/#/fuzz_}" -- -j"$(nproc)" | grep -E "error|FAILED" || true
for t in "${targets[@]}"; do
  [ -x "$build/bin/fuzz_$t" ] || { echo "fuzz.sh: building fuzz_$t failed (run: cmake --build $build --target fuzz_$t)" >&2; exit 1; }
done

status=0
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  # The parsers that read a path get their input through a scratch file: on tmpfs that is ~20x
  # faster than on disk here (docs/reliability.md).
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then tmp=$(mktemp -d /dev/shm/tg-fuzz-XXXXXX); else tmp=$(mktemp -d "$PWD/$work/tmp-XXXXXX"); fi
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
  log="$work/fuzz.log"
  set +e
  TMPDIR="$tmp" "$build/bin/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work/corpus" >"$log" 2>&1
  rc=$?
  set -e
  rm -rf "$tmp"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1 || true)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $t: ${secs:-?} s, ${execs:-?} executions, no finding (log: $log)"
  else
    status=1
    artifact=$(grep -o "Test unit written to .*" "$log" | sed 's/Test unit written to //' | tail -1 || true)
    echo "fuzz $t: FINDING after ${execs:-?} executions (exit $rc): ${artifact:-see the log} (log: $log)" >&2
    grep -m1 -E "ERROR: |SUMMARY: |==[0-9]+== |terminate called|runtime error" "$log" >&2 || tail -n 20 "$log" >&2
  fi
done
exit "$status"
