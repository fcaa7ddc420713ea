#!/usr/bin/env bash
# Checks commit messages against CONTRIBUTING.md's convention and prints one line per violation:
# a subject longer than 72 characters, a subject ending in a period, no blank line after the
# subject, no body. Merge commits are not checked.
#   scripts/check_commits.sh [RANGE]   # a git revision range, e.g. origin/main..HEAD or HEAD~5..
# Without RANGE: the commit that wrote the convention into CONTRIBUTING.md and every later one
# (older commits predate the convention). Exits 1 on any violation, 2 when git refuses RANGE.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8  # ${#subject} counts characters, not bytes
first=144b6b4e5be0460642a1b58e51a1815eaede7873  # "Write the commit-message convention into CONTRIBUTING.md"
case "${1:-}" in -h|--help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[ $# -le 1 ] || { echo "usage: scripts/check_commits.sh [RANGE]" >&2; exit 2; }
range=${1:-$first^..HEAD}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# One record per commit, NUL-separated: the abbreviated hash on the first line, then the raw message.
git log -z --no-merges --format='%h%n%B' "$range" -- >"$log" || exit 2

commits=0 violations=0
report() {  # problem: prints the hash, the problem and the subject (cut at 60 characters)
  local shown=$subject
  [ ${#shown} -le 60 ] || shown="${shown:0:57}..."
  printf '%s %s: %s\n' "$hash" "$1" "$shown"
  violations=$((violations + 1))
}
while IFS= read -r -d '' record || [ -n "$record" ]; do
  hash=${record%%$'\n'*}
  message=${record#*$'\n'}
  mapfile -t lines <<<"$message"
  subject=${lines[0]:-}
  commits=$((commits + 1))
  [ ${#subject} -le 72 ] || report "subject is ${#subject} characters (at most 72)"
  [[ $subject != *. ]] || report "subject ends in a period"
  [[ ! ${lines[1]:-} =~ [^[:space:]] ]] || report "no blank line after the subject"
  body=0
  for line in "${lines[@]:1}"; do [[ $line =~ [^[:space:]] ]] && { body=1; break; }; done
  [ "$body" -eq 1 ] || report "no body"
done <"$log"

echo "check_commits.sh: $commits commits in $range, $violations violations" >&2
[ "$violations" -eq 0 ]
