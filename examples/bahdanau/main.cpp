// bahdanau: train, run and score attention translators from the command line.
//
//   bahdanau train --task dates --steps 2000 --out ckpt --log-csv loss.csv
//   bahdanau train --data data/fra-eng/train.tsv --subword 8000 --model rnnsearch --out ckpt
//   bahdanau train --data data/fra-eng/train.tsv --dev data/fra-eng/dev.tsv --subword 8000 --batch-tokens 4000
//       --patience 5 --lr-decay 0.5 --max-minutes 180 --out ckpt --log-csv log.csv   (one command; best in ckpt.best)
//   mpirun -np 2 bahdanau train --task dates --steps 2000 --out ckpt    (data parallel; rank 0 writes)
//   bahdanau translate --model ckpt --heatmap att.svg "the 3 rd of march 1 9 9 7"
//   echo "go ." | bahdanau translate --model ckpt --beam 4
//   bahdanau eval --model ckpt --split heldout
//   bahdanau bleu --hyp out.txt --ref ref.txt --metric sacrebleu
//   bahdanau average --models ckpt.a ckpt.b ckpt.c --out ckpt.avg
//   bahdanau bleu --metric sacrebleu --by-length --src src.txt --ref ref.txt --hyp a.txt --label A --hyp b.txt --label B
//   bahdanau split --data fra.txt --out data/fra-eng --test 5000 --dev 2000
//   bahdanau experiment length --quick --out-dir out/experiments/length
//   bahdanau gradcheck --model rnnsearch
//
// stdout carries results only (translations, scores); progress, summaries and warnings go to
// stderr. Any usage error or unreadable input prints "bahdanau: error: ..." on stderr (one line;
// a few errors add indented details on the lines after it) and exits with status 2; so do an
// output that would overwrite an input (checked before any work), a write error on stdout and
// running out of memory ("bahdanau: error: out of memory ..."). The CLI itself is
// tg::cli::bahdanau_main (bahdanau.h, cli.cpp), which the fuzz target tests/fuzz/fuzz_cli.cpp links
// with every source of this folder but this one.
//
// The files: main.cpp (this), cli.cpp (bahdanau_main: builds the CLI11 app from each subcommand's
// add_<name> and runs the chosen one), one <name>.cpp per subcommand (its flags and its run),
// common.h (what several share: errors, file checks, validators, --precision, --threads),
// data_args.h (the data flags of train and eval) and decode_args.h (the decoding flags of
// translate and eval). A new subcommand: <name>.cpp defining add_<name>, its declaration in
// common.h, one entry in bahdanau_main's list and one in sources.cmake.
//
// `--precision bf16` (train, translate, eval, experiment) runs the matrix products under
// tg::autocast (bf16 operands, float32 sums; weights, losses and Adam stay float32); train records it
// in training.json, so --init-from continues in it. `bahdanau --version` names the CPU, the kernel
// paths and the bf16 path this machine takes.
#include "bahdanau.h"

int main(int argc, char** argv) { return tg::cli::bahdanau_main(argc, argv); }
