#!/usr/bin/env bash
# Issue 16's real-corpus experiment, end to end: split fra.txt (test 5,000, dev 2,000, the rest
# train), train a translator with a joint SentencePiece vocabulary and dev validation under a time
# limit, then translate the test set with beam 5 from the best dev checkpoint and score it
# (sacreBLEU-compatible BLEU and chrF2). Everything lands in the results directory:
#   command.txt  the exact commands, commit, machine and wall times (each run appends)
#   train.csv    per-step log with dev_loss/dev_bleu columns      train.log  stderr of training
#   ckpt/        last checkpoint (resumable)    ckpt.best/  best dev BLEU checkpoint
#   test.hyp.txt one translation per test sentence                scores.txt BLEU and chrF lines
#
#   scripts/real_translation.sh                         # RNNsearch, 180 minutes (the issue's budget)
#   MODEL=rnnencdec scripts/real_translation.sh         # the baseline without attention
#   TRAIN_PAIRS=2000 TEST_PAIRS=200 MINUTES=1 scripts/real_translation.sh   # a smoke run
# Settings (environment): DATA (fra.txt), MODEL, MINUTES, SUBWORD (pieces), EMBED, HIDDEN,
# NUM_STEPS, BATCH_TOKENS, LR, LR_DECAY, LR_PATIENCE, PATIENCE, VALIDATE_EVERY, DEV_BLEU_PAIRS,
# TRAIN_PAIRS (0 = all), TEST_PAIRS (0 = all), THREADS (0 = all cores), SEED, RESULTS, SPLIT_DIR,
# EXTRA (further `bahdanau train` options of a new run, e.g. the transformer's sizes).
# Running it again with the same RESULTS continues the training from ckpt/ up to the same limit
# (the time limit counts every run), then translates and scores again.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin/bahdanau
[[ -x $bin ]] || { echo "real_translation.sh: $bin not built (see README.md)" >&2; exit 2; }

DATA=${DATA:-../shared/data/fra-eng/fra.txt}
MODEL=${MODEL:-rnnsearch}
MINUTES=${MINUTES:-180}
SUBWORD=${SUBWORD:-8000}
EMBED=${EMBED:-128}
HIDDEN=${HIDDEN:-256}
NUM_STEPS=${NUM_STEPS:-40}
BATCH_TOKENS=${BATCH_TOKENS:-2000}
LR=${LR:-0.002}
LR_DECAY=${LR_DECAY:-0.5}
LR_PATIENCE=${LR_PATIENCE:-2}
PATIENCE=${PATIENCE:-6}
VALIDATE_EVERY=${VALIDATE_EVERY:-500}
DEV_BLEU_PAIRS=${DEV_BLEU_PAIRS:-500}
TRAIN_PAIRS=${TRAIN_PAIRS:-0}
TEST_PAIRS=${TEST_PAIRS:-0}
THREADS=${THREADS:-0}
SEED=${SEED:-1}
SPLIT_DIR=${SPLIT_DIR:-out/real_translation/data}
RESULTS=${RESULTS:-out/real_translation/$MODEL}
read -r -a extra <<< "${EXTRA:-}"

mkdir -p "$RESULTS"
log="$RESULTS/command.txt"
source scripts/command_log.sh
command_log_start "$log" scripts/real_translation.sh "$(uname -sr)"

# 1. The split (deterministic: the same files every time), made once and shared by the models.
if [[ ! -f $SPLIT_DIR/test.tsv ]]; then
  run "$bin" split --data "$DATA" --out "$SPLIT_DIR" --test 5000 --dev 2000
fi

# 2. Training: subword vocabulary, token batches, dev validation (best by dev BLEU), lr decay on a
#    plateau, early stopping, time limit. Reruns continue from the checkpoint.
#    A continued run takes the data, the architecture and the settings from ckpt/training.json.
train=(--max-minutes "$MINUTES" --epochs 1000 --log-csv "$RESULTS/train.csv" --out "$RESULTS/ckpt" --threads "$THREADS")
if [[ -f $RESULTS/ckpt/training.json ]]; then
  run "$bin" train --init-from "$RESULTS/ckpt" "${train[@]}" 2> >(tee -a "$RESULTS/train.log" >&2)
else
  train+=(--data "$SPLIT_DIR/train.tsv" --dev "$SPLIT_DIR/dev.tsv" --dev-bleu-pairs "$DEV_BLEU_PAIRS"
          --validate-every "$VALIDATE_EVERY" --best "$RESULTS/ckpt.best")
  if ((TRAIN_PAIRS > 0)); then train+=(--num-examples "$TRAIN_PAIRS"); fi
  run "$bin" train "${train[@]}" --subword "$SUBWORD" --model "$MODEL" --embed-size "$EMBED" --num-hiddens "$HIDDEN" \
    --num-steps "$NUM_STEPS" --batch-tokens "$BATCH_TOKENS" --lr "$LR" --lr-decay "$LR_DECAY" \
    --lr-patience "$LR_PATIENCE" --patience "$PATIENCE" --seed "$SEED" ${extra[@]+"${extra[@]}"} 2> >(tee "$RESULTS/train.log" >&2)
fi

# 3. Test translations with beam 5 (GNMT length penalty 0.6, at most 1.5 x source + 5 pieces) from
#    the best dev checkpoint, then the scores on the detokenised text.
best="$RESULTS/ckpt.best"
[[ -f $best/weights.npz ]] || best="$RESULTS/ckpt"
src="$SPLIT_DIR/test.src.txt" ref="$SPLIT_DIR/test.ref.txt"
if ((TEST_PAIRS > 0)); then
  head -n "$TEST_PAIRS" "$SPLIT_DIR/test.src.txt" > "$RESULTS/test.src.txt"
  head -n "$TEST_PAIRS" "$SPLIT_DIR/test.ref.txt" > "$RESULTS/test.ref.txt"
  src="$RESULTS/test.src.txt" ref="$RESULTS/test.ref.txt"
fi
run "$bin" translate --model "$best" --beam 5 --length-penalty gnmt --alpha 0.6 --max-len-a 1.5 --max-len-b 5 \
  --threads "$THREADS" --quiet < "$src" > "$RESULTS/test.hyp.txt"
{
  echo "# $(wc -l < "$RESULTS/test.hyp.txt") test sentences, $best"
  "$bin" bleu --hyp "$RESULTS/test.hyp.txt" --ref "$ref" --metric sacrebleu
  "$bin" bleu --hyp "$RESULTS/test.hyp.txt" --ref "$ref" --metric chrf
} > "$RESULTS/scores.txt"
echo "# translate reads $src; scores: bahdanau bleu --metric sacrebleu|chrf --ref $ref" >> "$log"
cat "$RESULTS/scores.txt"
