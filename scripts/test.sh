#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GoogleTest through CTest); then names each
# skipped test with the reason it gave. Exits with ctest's status.
#   scripts/test.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test "$@"
cd build
set +e
ctest --output-on-failure -j"$(nproc)" --timeout 600
status=$?
set -e
# GoogleTest writes "FILE:LINE: Skipped", then the reason, then "[  SKIPPED ] Suite.Test (N ms)".
awk '/: Skipped$/ { getline reason; next_reason = reason }
     /^\[  SKIPPED \] [^ ]+ \(/ { printf "skipped: %s: %s\n", $4, next_reason; next_reason = "" }' \
  Testing/Temporary/LastTest.log
exit $status
