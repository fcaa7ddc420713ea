#!/usr/bin/env bash
# Kill test: SIGKILLs a checkpointing training run over and over, resuming it each time, and checks
# that every checkpoint left behind loads, that the finished run equals an uninterrupted one bit for
# bit, and that nothing stray is left beside the output. See docs/reliability.md, "Kill test".
#   scripts/kill_test.sh [KILLS]      (default 50)
# Environment: BAHDANAU=path uses that binary instead of building (scripts/setup.sh main);
# KILL_SEED=n fixes the kill timings (default: random, printed); KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
kills_wanted=${1:-50}
[[ $kills_wanted =~ ^[0-9]+$ ]] || { echo "usage: scripts/kill_test.sh [KILLS]" >&2; exit 2; }

if [ -z "${BAHDANAU:-}" ]; then
  scripts/setup.sh main >&2
  BAHDANAU=$PWD/build/bin/bahdanau
fi
[ -x "$BAHDANAU" ] || { echo "kill_test: $BAHDANAU is not an executable" >&2; exit 2; }
seed=${KILL_SEED:-$(( $(od -An -N2 -tu2 /dev/urandom) ))}
RANDOM=$seed
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-kill-test.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "kill_test: work directory $work" >&2; else trap 'rm -rf "$work"' EXIT; fi

# Small and fast: 25 steps per epoch, a checkpoint at every epoch end (each save fsyncs several
# files, so a good part of the run is spent saving and random kills often land in a save).
# Training is deterministic for a fixed seed (autograd/parallel.h); one thread keeps the load low.
config=(--task dates --num-examples 400 --model rnnsearch --embed-size 16 --num-hiddens 16 --num-steps 16
        --batch-size 16 --lr 0.005 --seed 7 --checkpoint-every 1)
epochs=30
common=(--epochs "$epochs" --threads 1 --quiet)
ck_files="config.json manifest.json optimizer.npz src_vocab.txt tgt_vocab.txt training.json weights.npz"

# What must be identical, with nothing time-dependent in it: the members of the .npz files (their
# zip headers carry a modification time, so the archives' bytes and their SHA-256 in manifest.json
# differ between identical runs), the other files byte for byte, training.json without elapsed_s.
content_digest() {  # DIR
  local d=$1 z m f
  for f in config.json src_vocab.txt tgt_vocab.txt; do echo "$f $(sha256sum <"$d/$f" | cut -c1-64)"; done
  for z in weights.npz optimizer.npz; do
    [ "$(zipinfo -1 "$d/$z" | wc -l)" -gt 0 ] || echo "$z: no members"
    while IFS= read -r m; do
      echo "$z:$m $(unzip -p "$d/$z" "$m" | sha256sum | cut -c1-64)"
    done < <(zipinfo -1 "$d/$z")
  done
  echo "training.json $(grep -v '"elapsed_s"' "$d/training.json" | sha256sum | cut -c1-64)"
}
# The log without elapsed_s (the last column).
log_digest() { cut -d, -f1-6 "$1"; }
# Names in DIR other than the expected ones (ARGS...), one per line.
extra_entries() {  # DIR NAME...
  local d=$1; shift
  local e n ok
  for e in "$d"/* "$d"/.[!.]*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    n=${e##*/}; ok=0
    for x in "$@"; do [ "$n" = "$x" ] && ok=1; done
    [ $ok = 1 ] || echo "$n"
  done
}
tmp_dirs() { ls -d "$1".tmp-* 2>/dev/null || true; }  # DIR: its temporary siblings

echo "kill_test: $BAHDANAU, kill seed $seed, $kills_wanted kills, work directory $work"

# ---- reference: one uninterrupted run ----------------------------------------------------------
mkdir "$work/ref"
t0=$(date +%s.%N)
"$BAHDANAU" train "${config[@]}" "${common[@]}" --out "$work/ref/ck" --log-csv "$work/ref/log.csv" 2>"$work/ref/stderr" \
  || { echo "kill_test: the reference run failed:" >&2; cat "$work/ref/stderr" >&2; exit 1; }
t1=$(date +%s.%N)
ref_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
ref_steps=$(tail -n 1 "$work/ref/log.csv" | cut -d, -f1)
echo "kill_test: reference run: $ref_steps steps in $ref_ms ms, $epochs checkpoints"
ref_digest=$(content_digest "$work/ref/ck")
ref_log=$(log_digest "$work/ref/log.csv")

# ---- killed runs ------------------------------------------------------------------------------
# Half the kills come after a random delay (uniform in 0..max_ms from the process start), half are
# aimed at a save: wait until a new DIR.tmp-* appears, then kill within 0..aim_ms.
max_ms=$(( ref_ms * 4 / (kills_wanted > 0 ? kills_wanted : 1) + 50 ))
aim_ms=120
kills=0 in_save=0 no_ck=0 corrupt=0 stale_seen=0 rounds=0 failures=0 runs=0 no_op=0
check_checkpoint() {  # DIR: loads (manifest and every file verified), holds only checkpoint files
  local d=$1 extra
  if ! "$BAHDANAU" eval --model "$d" --split train --threads 1 >/dev/null 2>"$work/eval.err"; then
    echo "kill_test: kill $kills: $d does not load: $(head -n 1 "$work/eval.err")" >&2
    corrupt=$((corrupt + 1)); return 1
  fi
  extra=$(extra_entries "$d" $ck_files)
  if [ -n "$extra" ]; then
    echo "kill_test: kill $kills: $d holds unexpected files: $extra" >&2
    corrupt=$((corrupt + 1)); return 1
  fi
}

while :; do
  rounds=$((rounds + 1))
  run=$work/run$rounds
  mkdir "$run"
  ck=$run/ck
  finished=0
  while [ $finished = 0 ]; do
    # Resume from the last checkpoint if there is one; otherwise start afresh.
    if [ -d "$ck" ]; then args=(--init-from "$ck"); else args=("${config[@]}" --out "$ck"); fi
    before=$(tmp_dirs "$ck")
    "$BAHDANAU" train "${args[@]}" "${common[@]}" --log-csv "$run/log.csv" 2>"$run/stderr" &
    pid=$!
    runs=$((runs + 1))
    if [ $kills -lt "$kills_wanted" ]; then
      if (( RANDOM % 2 )); then
        ms=$(( RANDOM % max_ms ))
      else
        # Wait (up to 5 s) for a save to start.
        for ((i = 0; i < 1000; i++)); do
          kill -0 $pid 2>/dev/null || break
          [ "$(tmp_dirs "$ck")" != "$before" ] && break
          sleep 0.005
        done
        ms=$(( RANDOM % aim_ms ))
      fi
      printf -v delay '%d.%03d' $((ms / 1000)) $((ms % 1000))
      sleep "$delay"
      kill -KILL $pid 2>/dev/null || true
    fi
    set +e; wait $pid 2>/dev/null; status=$?; set -e  # (no "Killed" job notice)
    if [ $status = 0 ]; then
      # Killed after its final save: the resume finds nothing left to do.
      grep -q "nothing to do" "$run/stderr" && no_op=$((no_op + 1))
      finished=1; continue
    fi
    if [ $status != 137 ]; then
      echo "kill_test: a resume failed (exit $status): $(grep -v '^bahdanau: rnnsearch' "$run/stderr" | head -n 3)" >&2
      failures=$((failures + 1)); break
    fi
    kills=$((kills + 1))
    after=$(tmp_dirs "$ck")
    new_tmp=$(comm -13 <(echo "$before") <(echo "$after") | grep -c . || true)
    [ "$new_tmp" -gt 0 ] && in_save=$((in_save + 1))
    [ -n "$after" ] && stale_seen=$((stale_seen + 1))
    if [ -d "$ck" ]; then
      check_checkpoint "$ck" || break
    else
      no_ck=$((no_ck + 1))
      # Killed before the first checkpoint: a fresh start rewrites the log.
    fi
  done
  [ $corrupt -gt 0 ] || [ $failures -gt 0 ] && break
  # The round is over: compare with the reference and look for leftovers.
  stray=$(extra_entries "$run" ck log.csv stderr)
  stray_ck=$(extra_entries "$ck" $ck_files)
  digest=$(content_digest "$ck")
  same=yes
  if [ "$digest" != "$ref_digest" ]; then
    same=no
    echo "kill_test: round $rounds: the final checkpoint differs from the reference:" >&2
    diff <(echo "$ref_digest") <(echo "$digest") >&2 || true
  fi
  if [ "$(log_digest "$run/log.csv")" != "$ref_log" ]; then
    same=no
    echo "kill_test: round $rounds: the CSV log (without elapsed_s) differs from the reference:" >&2
    diff <(echo "$ref_log") <(log_digest "$run/log.csv") | head -n 10 >&2 || true
  fi
  [ -z "$stray" ] || echo "kill_test: round $rounds: stray files beside the checkpoint: $(echo $stray)" >&2
  [ -z "$stray_ck" ] || echo "kill_test: round $rounds: stray files in the checkpoint: $(echo $stray_ck)" >&2
  [ -z "$stray$stray_ck" ] || failures=$((failures + 1))
  [ $same = yes ] || failures=$((failures + 1))
  echo "kill_test: round $rounds finished: $kills kills so far, identical: $same, stray files: $( [ -z "$stray$stray_ck" ] && echo none || echo $stray $stray_ck)"
  [ $failures = 0 ] || break
  # A round that finished before enough kills: another killed run from scratch.
  [ $kills -lt "$kills_wanted" ] || break
done

echo
echo "kill test summary (kill seed $seed)"
echo "  training runs started:              $runs ($rounds round(s), each compared with the reference)"
echo "  kills:                              $kills"
echo "  kills that landed during a save:    $in_save (a new $(basename "$ck").tmp-* existed right after the kill)"
echo "  kills before the first checkpoint:  $no_ck"
echo "  kills after which a stale tmp dir remained until the next save: $stale_seen"
echo "  final resumes with nothing to do:   $no_op (the kill came after the final save)"
echo "  corrupt checkpoints:                $corrupt"
echo "  failed resumes / rounds:            $failures"
echo "  stray files at the end:             $( [ -z "${stray:-}${stray_ck:-}" ] && echo none || echo ${stray:-} ${stray_ck:-})"
echo "  identical to the uninterrupted run: ${same:-no}"
if [ $corrupt -gt 0 ] || [ $failures -gt 0 ] || [ "${same:-no}" != yes ] || [ $kills -lt "$kills_wanted" ]; then
  echo "kill_test: FAILED" >&2
  exit 1
fi
echo "kill_test: passed"
