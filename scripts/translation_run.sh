#!/usr/bin/env bash
# Issue 40's real-translation recipe, one command from the corpus to the test score:
#   scripts/translation_run.sh RESULTS [-- bahdanau train options: the model and its recipe]
# 1. Splits fra.txt once (test 5,000, dev 2,000, the rest train; the same files every time).
# 2. Trains under a time limit in stages (30 min, 60 min, then MINUTES-10, MINUTES-5, MINUTES: each
#    stage continues the last one exactly with --init-from), keeping after every stage the best dev
#    checkpoint so far (snapshots/best-Nmin) and the last one (snapshots/last-Nmin).
# 3. Chooses on dev only, by a rule fixed here before any test score: for each reported time (30, 60,
#    MINUTES) the candidates are the best dev checkpoint at that time, and at MINUTES also the last
#    checkpoint and the average of the last three stages' checkpoints; each candidate is translated
#    with beam 5 at every GNMT alpha in ALPHAS on the first DEV_PAIRS dev pairs; the highest dev
#    BLEU wins (ties: the earlier candidate, then the smaller alpha).
# 4. Translates the 5,000 test sentences once per reported time (MINUTES first) with the chosen
#    checkpoint and alpha, and scores them (sacreBLEU-compatible BLEU 13a and chrF2, detokenised,
#    cased). Translation runs in float32 (translate's default) whatever precision trained the model.
# 5. The paper's Figure 2 (test BLEU by source length) and two attention heatmaps of the final choice.
# Everything lands in RESULTS: command.txt (every command, commit, CPU, wall times), train.csv,
# train.log, selection.tsv (every dev score), chosen-Nmin.txt, test-Nmin.hyp.txt, scores.txt,
# bleu_by_length.{csv,svg}, attention-{1,2}.{svg,txt}.
# Running it again with the same RESULTS skips what is done and continues what is not.
# French to English: give --reverse among the train options (the same split, sides swapped).
# Settings (environment): DATA, MINUTES (150), THREADS (0 = all cores), ALPHAS ("0.6 1.0 1.4"),
# DEV_PAIRS (2000), SPLIT_DIR (out/real_translation/data), STAGES (override the training stages).
set -euo pipefail
main() {  # the whole script is one function: bash reads it at once, so editing the file mid-run is safe
cd "$(dirname "$0")/.."
bin=build/bin/bahdanau
[[ -x $bin ]] || { echo "translation_run.sh: $bin not built (see README.md)" >&2; exit 2; }
(($# >= 1)) || { echo "usage: scripts/translation_run.sh RESULTS [-- bahdanau train options]" >&2; exit 2; }
RESULTS=$1; shift
if (($# > 0)); then [[ $1 == -- ]] || { echo "translation_run.sh: expected -- before the train options" >&2; exit 2; }; shift; fi
model_args=("$@")

DATA=${DATA:-../shared/data/fra-eng/fra.txt}
MINUTES=${MINUTES:-150}
THREADS=${THREADS:-0}
ALPHAS=${ALPHAS:-0.6 1.0 1.4}
DEV_PAIRS=${DEV_PAIRS:-2000}
SPLIT_DIR=${SPLIT_DIR:-out/real_translation/data}
STAGES=${STAGES:-30 60 $((MINUTES - 10)) $((MINUTES - 5)) $MINUTES}
reverse=0
for a in "${model_args[@]}"; do [[ $a == --reverse ]] && reverse=1; done

mkdir -p "$RESULTS/snapshots"
log="$RESULTS/command.txt"
source scripts/command_log.sh
command_log_start "$log" scripts/translation_run.sh "$("$bin" --version 2>/dev/null | tr '\n' ' ')"

# 1. The split.
if [[ ! -f $SPLIT_DIR/test.tsv ]]; then
  run "$bin" split --data "$DATA" --out "$SPLIT_DIR" --test 5000 --dev 2000
fi
if ((reverse)); then src_side=ref ref_side=src; else src_side=src ref_side=ref; fi

# 2. Training in stages. A stage's snapshots are taken once its training time is reached.
ck="$RESULTS/ckpt"
for m in $STAGES; do
  [[ -f $RESULTS/snapshots/last-${m}min/weights.npz ]] && continue
  train=(--max-minutes "$m" --log-csv "$RESULTS/train.csv" --out "$ck" --threads "$THREADS")
  if [[ -f $ck/training.json ]]; then
    run "$bin" train --init-from "$ck" "${train[@]}" 2> >(tee -a "$RESULTS/train.log" >&2)
  else
    run "$bin" train "${train[@]}" --data "$SPLIT_DIR/train.tsv" --dev "$SPLIT_DIR/dev.tsv" \
      --best "$ck.best" --epochs 1000 "${model_args[@]}" 2> >(tee "$RESULTS/train.log" >&2)
  fi
  for kind in best last; do
    from=$ck; [[ $kind == best ]] && from=$ck.best
    rm -rf "$RESULTS/snapshots/.tmp" && cp -r "$from" "$RESULTS/snapshots/.tmp"
    rm -rf "$RESULTS/snapshots/$kind-${m}min" && mv "$RESULTS/snapshots/.tmp" "$RESULTS/snapshots/$kind-${m}min"
  done
done

# 3. Selection on dev (beam 5, GNMT alpha from ALPHAS), written to selection.tsv as it goes.
read -r -a stages <<< "$STAGES"
final=${stages[-1]}
n=${#stages[@]}
if ((n >= 3)) && [[ ! -f $RESULTS/snapshots/average-${final}min/weights.npz ]]; then
  run "$bin" average --models "$RESULTS/snapshots/last-${stages[n-3]}min" "$RESULTS/snapshots/last-${stages[n-2]}min" \
    "$RESULTS/snapshots/last-${final}min" --out "$RESULTS/snapshots/average-${final}min"
fi
head -n "$DEV_PAIRS" "$SPLIT_DIR/dev.$src_side.txt" > "$RESULTS/dev.src.txt"
head -n "$DEV_PAIRS" "$SPLIT_DIR/dev.$ref_side.txt" > "$RESULTS/dev.ref.txt"
sel="$RESULTS/selection.tsv"
[[ -f $sel ]] || printf 'minutes\tcandidate\talpha\tdev_bleu\n' > "$sel"
translate() {  # translate CHECKPOINT ALPHA: sets the array cmd (stdin: sources, stdout: translations)
  cmd=("$bin" translate --model "$1" --beam 5 --length-penalty gnmt --alpha "$2" --max-len-a 1.5 --max-len-b 5
       --threads "$THREADS" --quiet)
}
scores="$RESULTS/scores.txt"
reported=()
for m in "$final" 60 30; do  # the final time first: it is the headline
  [[ -d $RESULTS/snapshots/best-${m}min ]] || continue
  [[ " ${reported[*]-} " == *" $m "* ]] && continue
  reported+=("$m")
  candidates=("best-${m}min")
  if [[ $m == "$final" ]]; then candidates+=("last-${m}min" "average-${m}min"); fi
  for c in "${candidates[@]}"; do
    for a in $ALPHAS; do
      grep -q -P "^$m\t$c\t$a\t" "$sel" && continue
      start=$(date +%s)
      translate "$RESULTS/snapshots/$c" "$a"
      "${cmd[@]}" < "$RESULTS/dev.src.txt" > "$RESULTS/dev.hyp.txt"
      score=$("$bin" bleu --hyp "$RESULTS/dev.hyp.txt" --ref "$RESULTS/dev.ref.txt" --metric sacrebleu | sed -n 's/^BLEU[^=]*= \([0-9.]*\) .*/\1/p')
      printf '%s\t%s\t%s\t%s\n' "$m" "$c" "$a" "$score" >> "$sel"
      echo "# dev: $c alpha $a -> $score ($(($(date +%s) - start)) s)" >> "$log"
    done
  done
  rm -f "$RESULTS/dev.hyp.txt"

  # 4. The test set, once per reported time, with the dev choice: the first row with the highest dev
  #    BLEU among this time's rows (a stable sort keeps the file's order).
  hyp="$RESULTS/test-${m}min.hyp.txt"
  [[ -f $hyp ]] && continue
  read -r c a dev < <(awk -F'\t' -v m="$m" 'NR > 1 && $1 == m { print $2, $3, $4 }' "$sel" | sort -s -k3,3gr | head -n1)
  translate "$RESULTS/snapshots/$c" "$a"
  run "${cmd[@]}" < "$SPLIT_DIR/test.$src_side.txt" > "$hyp.tmp"
  mv "$hyp.tmp" "$hyp"
  {
    echo "# ${m} minutes: $c, GNMT alpha $a (dev BLEU $dev on $DEV_PAIRS pairs, beam 5); $(wc -l < "$hyp") test sentences"
    "$bin" bleu --hyp "$hyp" --ref "$SPLIT_DIR/test.$ref_side.txt" --metric sacrebleu
    "$bin" bleu --hyp "$hyp" --ref "$SPLIT_DIR/test.$ref_side.txt" --metric chrf
  } >> "$scores"
  echo "$c $a" > "$RESULTS/chosen-${m}min.txt"
done

# 5. The paper's Figure 2 (test BLEU by source length) for every reported time, and the final
#    choice's attention on two test sentences (a long one and a reordering).
by_length=(--metric sacrebleu --by-length --src "$SPLIT_DIR/test.$src_side.txt" --ref "$SPLIT_DIR/test.$ref_side.txt")
for m in "${reported[@]}"; do by_length+=(--hyp "$RESULTS/test-${m}min.hyp.txt" --label "${m} min"); done
"$bin" bleu "${by_length[@]}" --csv "$RESULTS/bleu_by_length.csv" --svg "$RESULTS/bleu_by_length.svg" > /dev/null
read -r c a < "$RESULTS/chosen-${final}min.txt"
i=0
for line in 4991 4050; do  # a long sentence, then a noun-adjective reordering ("a white dog")
  i=$((i + 1))
  sentence=$(sed -n "${line}p" "$SPLIT_DIR/test.$src_side.txt")
  [[ -n $sentence ]] || continue  # a smaller test set (a smoke run)
  translate "$RESULTS/snapshots/$c" "$a"
  "${cmd[@]}" --heatmap "$RESULTS/attention-$i.svg" "$sentence" > "$RESULTS/attention-$i.txt"
done
cat "$scores"
}
main "$@"
