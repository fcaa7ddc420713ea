#!/usr/bin/env bash
# Soak test: one long training run of a small model, its resident memory (VmRSS) sampled against
# its step count; fails if memory grows by 64 KiB or more per 1,000 steps after the warm-up. See
# docs/reliability.md, "Soak test".
#   scripts/soak.sh [MINUTES]     (default 30)
# Environment: BAHDANAU=path uses that binary instead of building (scripts/setup.sh main);
# SOAK_INTERVAL=seconds between samples (default 5); SOAK_THREADS (default 1); KEEP=1 keeps the
# work directory (samples.tsv: seconds, step, VmRSS in KiB).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
[[ $minutes =~ ^[0-9]+$ ]] && [ "$minutes" -gt 0 ] || { echo "usage: scripts/soak.sh [MINUTES]" >&2; exit 2; }
interval=${SOAK_INTERVAL:-5}
threads=${SOAK_THREADS:-1}
limit_kib=64  # per 1,000 steps

if [ -z "${BAHDANAU:-}" ]; then
  scripts/setup.sh main >&2
  BAHDANAU=$PWD/build/bin/bahdanau
fi
[ -x "$BAHDANAU" ] || { echo "soak: $BAHDANAU is not an executable" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-soak.XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "soak: work directory $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# A small model that runs many steps; 157 steps per epoch, a checkpoint at each epoch end (the
# default rate); a step target far beyond what MINUTES can reach, so the run never ends by itself.
duration=$((minutes * 60))
warmup=$((duration / 10 > 60 ? duration / 10 : 60))
[ $warmup -lt $duration ] || warmup=$((duration / 2))
cmd=("$BAHDANAU" train --task dates --num-examples 10000 --holdout 0 --model rnnsearch --embed-size 16
     --num-hiddens 32 --num-steps 16 --batch-size 64 --lr 0.005 --seed 1 --steps 1000000000
     --checkpoint-every 1 --threads "$threads" --quiet --out "$work/ck" --log-csv "$work/log.csv")
echo "soak: ${cmd[*]}"
echo "soak: $minutes min, a sample every $interval s, warm-up $warmup s, limit $limit_kib KiB per 1,000 steps"
"${cmd[@]}" 2>"$work/stderr" &
pid=$!
start=$(date +%s.%N)
samples=$work/samples.tsv
: >"$samples"
died=0
while :; do
  sleep "$interval"
  now=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
  if [ -z "$rss" ] || ! kill -0 "$pid" 2>/dev/null; then died=1; break; fi
  # The last complete row (the very last one may be half written).
  step=$(tail -n 2 "$work/log.csv" 2>/dev/null | head -n 1 | cut -d, -f1)
  [[ $step =~ ^[0-9]+$ ]] && printf '%s\t%s\t%s\n' "$now" "$step" "$rss" >>"$samples"
  awk -v t="$now" -v d="$duration" 'BEGIN { exit !(t >= d) }' && break
done
if [ $died = 1 ]; then
  echo "soak: the training run ended early:" >&2
  cat "$work/stderr" >&2
  exit 1
fi
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=

# The checkpoint a kill at an arbitrary point leaves must load.
ck_ok=yes
"$BAHDANAU" translate --model "$work/ck" --threads 1 "3/3/97" >/dev/null 2>"$work/translate.err" || ck_ok=no

echo
echo "   seconds       step    VmRSS KiB"
awk -v n="$(wc -l <"$samples")" 'NR == 1 || NR == n || NR % int(n / 12 + 1) == 0 { printf "%10.1f %10d %12d\n", $1, $2, $3 }' "$samples"
# Least squares of RSS on step over the samples after the warm-up.
read -r count first_rss last_rss max_rss first_step last_step slope < <(awk -v w="$warmup" '
  $1 >= w { n++; x = $2; y = $3; sx += x; sy += y; sxx += x * x; sxy += x * y
            if (n == 1) { r0 = y; s0 = x } r1 = y; s1 = x; if (y > mx) mx = y }
  END { d = n * sxx - sx * sx; b = (n > 1 && d > 0) ? (n * sxy - sx * sy) / d : 0
        printf "%d %d %d %d %d %d %.3f\n", n, r0, r1, mx, s0, s1, b * 1000 }' "$samples")
total_steps=$(tail -n 1 "$samples" | cut -f2)
echo
echo "soak test summary"
echo "  run:                       $minutes min, $total_steps steps ($(awk -v s="$total_steps" -v d="$duration" 'BEGIN { printf "%.0f", s / d }') steps/s), $threads thread(s)"
echo "  samples after the warm-up: $count (steps $first_step-$last_step)"
echo "  VmRSS after the warm-up:   $first_rss KiB"
echo "  VmRSS at the end:          $last_rss KiB (max $max_rss KiB)"
echo "  growth (least squares):    $slope KiB per 1,000 steps (limit $limit_kib)"
echo "  checkpoint after the kill: $( [ $ck_ok = yes ] && echo loads || echo "does not load: $(head -n 1 "$work/translate.err")")"
if [ "$count" -lt 10 ] || [ $ck_ok != yes ] || awk -v s="$slope" -v l="$limit_kib" 'BEGIN { exit !(s >= l) }'; then
  [ "$count" -lt 10 ] && echo "soak: too few samples after the warm-up ($count)" >&2
  echo "soak: FAILED" >&2
  exit 1
fi
echo "soak: passed"
