#!/usr/bin/env bash
# d2l's Bahdanau-attention experiment: the first 600 pairs of fra.txt (d2l's num_examples=600
# reads 601 lines, so --num-examples 601), embed 32, hidden 32, 2 layers, dropout 0.1, batch 64,
# num_steps 10, lr 0.005, 250 epochs; then d2l's four sentences with BLEU-2. One run per seed.
#   scripts/d2l_experiment.sh [DATA] [SEEDS...]    (default ../shared/data/fra-eng/fra.txt, seeds 1 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/fra-eng/fra.txt}
shift || true
seeds=("$@")
((${#seeds[@]})) || seeds=(1 2 3)
mkdir -p out/d2l
eng=("go ." "i lost ." "he's calm ." "i'm home .")
fra=("va !" "j'ai perdu ." "il est calme ." "je suis chez moi .")
printf '%s\n' "${fra[@]}" > out/d2l/ref.txt
for seed in "${seeds[@]}"; do
  ck=out/d2l/seed$seed
  start=$(date +%s.%N)
  build/bin/bahdanau train --data "$data" --num-examples 601 --model d2l --embed-size 32 --num-hiddens 32 \
    --num-layers 2 --dropout 0.1 --batch-size 64 --num-steps 10 --lr 0.005 --epochs 250 --seed "$seed" \
    --checkpoint-every 0 --quiet --log-csv "out/d2l/seed$seed.csv" --out "$ck"
  end=$(date +%s.%N)
  build/bin/bahdanau translate --model "$ck" "${eng[@]}" > "out/d2l/seed$seed.hyp"
  echo "== seed $seed ($(awk "BEGIN{printf \"%.1f\", $end - $start}") s)"
  paste -d'|' <(printf '%s\n' "${eng[@]}") "out/d2l/seed$seed.hyp" out/d2l/ref.txt | while IFS='|' read -r e h r; do
    printf '%-12s => %-22s bleu2 %s\n' "$e" "$h" "$(build/bin/bahdanau bleu --d2l-k 2 --hyp <(echo "$h") --ref <(echo "$r"))"
  done
done
