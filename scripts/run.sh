#!/usr/bin/env bash
# The main job: sets up and builds, trains the paper's RNNsearch on the built-in `dates` task
# (human-written dates -> ISO, generated in code: no download), scores it on held-out pairs,
# translates a few dates and writes the attention heatmap of the first one.
#   scripts/run.sh [extra `bahdanau train` flags, e.g. --epochs 3]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh main
mkdir -p out
ck=out/dates
build/bin/bahdanau train --task dates --num-examples 10000 --holdout 500 --model rnnsearch \
  --embed-size 32 --num-hiddens 64 --num-steps 16 --batch-size 64 --lr 0.005 --epochs 6 --seed 1 \
  --log-csv out/dates_train.csv --out "$ck" "$@"
echo
build/bin/bahdanau eval --model "$ck" --split heldout
echo
inputs=("the 3rd of march 1997" "3/3/97" "Tuesday, March 4, 1997" "july 14th, 2021" "31.12.1999")
echo "Translations (one token per character, as the task writes ISO dates):"
build/bin/bahdanau translate --model "$ck" --heatmap out/dates_heatmap.svg --show-attention "${inputs[@]}" \
  2>out/dates_attention.txt | paste -d'\t' <(printf '  %s\n' "${inputs[@]}") - | sed 's/\t/  ->  /'
echo
echo "Alignment of \"${inputs[0]}\" (rows: output tokens, columns: source tokens):"
awk 'BEGIN{n=0} /^$/{exit} {print "  " $0}' out/dates_attention.txt | tail -n +2
if command -v rsvg-convert >/dev/null; then rsvg-convert -o out/dates_heatmap.png out/dates_heatmap.svg; fi
echo
echo "Heatmap: out/dates_heatmap.svg$([ -f out/dates_heatmap.png ] && echo ' (and .png)'); per-step log: out/dates_train.csv"
