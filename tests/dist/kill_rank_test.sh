#!/usr/bin/env bash
# ctest dist.kill_rank: SIGKILLs rank 1 of `mpirun -np 2 bahdanau train` after its first checkpoint
# and checks that the job stops within a bounded time (instead of rank 0 waiting forever), and that
# the checkpoint already written loads and training resumes from it.
#   tests/dist/kill_rank_test.sh BAHDANAU MPIEXEC "MPIEXEC_FLAGS"
set -euo pipefail
bahdanau=$1 mpiexec=$2 flags=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-kill-rank.XXXXXX")
trap 'rm -rf "$work"' EXIT
config=(--task dates --num-examples 400 --model rnnsearch --embed-size 16 --num-hiddens 16 --num-steps 16
        --batch-size 16 --seed 7 --threads 1 --quiet --checkpoint-every 1)
# shellcheck disable=SC2086
$mpiexec $flags -np 2 "$bahdanau" train "${config[@]}" --epochs 1000 --out "$work/ck" >"$work/out.txt" 2>&1 &
launcher=$!
for _ in $(seq 600); do [ -f "$work/ck/training.json" ] && break; sleep 0.1; done
[ -f "$work/ck/training.json" ] || { echo "kill_rank: no checkpoint after 60 s"; cat "$work/out.txt"; exit 1; }
# Rank 1: the launcher's child whose environment says so.
victim=""
for pid in $(pgrep -P "$launcher"); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$pid; fi
done
[ -n "$victim" ] || { echo "kill_rank: rank 1 not found among the children of $launcher"; exit 1; }
start=$(date +%s)
kill -KILL "$victim"
status=0
wait "$launcher" || status=$?
took=$(( $(date +%s) - start ))
echo "kill_rank: mpirun exited with $status ${took} s after rank 1 was killed"
tail -n 8 "$work/out.txt"
[ "$status" -ne 0 ] || { echo "kill_rank: the job reported success"; exit 1; }
[ "$took" -le 30 ] || { echo "kill_rank: took ${took} s to stop (limit 30)"; exit 1; }
# What was saved is intact: it resumes (one process, one more step past it).
step=$(sed -n 's/.*"step": \([0-9]*\).*/\1/p' "$work/ck/training.json")
"$bahdanau" train --init-from "$work/ck" --steps $((step + 1)) --threads 1 --quiet >"$work/resume.txt" 2>&1 ||
  { echo "kill_rank: resuming from the checkpoint failed"; cat "$work/resume.txt"; exit 1; }
grep -q "trained to step $((step + 1))" "$work/resume.txt" || { cat "$work/resume.txt"; exit 1; }
echo "kill_rank: checkpoint at step $step resumed"
