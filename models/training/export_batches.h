#pragma once
// What a training run would train on, written out for another framework to train on the same
// batches (`bahdanau train --write-batches DIR`, read by scripts/pytorch_rnnsearch.py):
//
//   tg::models::write_training_batches("out/batches", *model, data, options, {.data = "train.tsv", .dev = "dev.tsv"});
//
//   DIR/batches.npz  int64 arrays: train_src, train_src_valid_len, train_tgt, train_tgt_valid_len
//                    (data.train as the model reads it: ids with <eos>, padded to num_steps);
//                    plan_rows, plan_offsets, plan_epoch (step k trains on the rows
//                    plan_rows[plan_offsets[k] : plan_offsets[k + 1]] of epoch plan_epoch[k]);
//                    with a dev set also dev_src, dev_src_valid_len, dev_tgt, dev_tgt_valid_len
//   DIR/meta.json    the model's sizes and options, the training options, the special ids, the
//                    data sources, train_rows, dev_rows, plan_steps, plan_epochs;
//                    "format": "tapegrad train --write-batches 1"
//   DIR/dev.ref.txt  with a dev set: the dev BLEU references (dev_references), one per line
//   DIR/init/        the model as given (its initialisation) as a checkpoint, with the
//                    vocabularies and options.subword() as tokenizer.model
//
// The plan is epoch_batch_rows (trainer.h) for options.steps() steps or options.epochs() epochs,
// the rows train() builds its batches from.
#include <cstdint>
#include <optional>
#include <string>

#include "models/text/data.h"
#include "models/training/trainer.h"
#include "models/translators/seq2seq.h"

namespace tg::models {

/// What meta.json records that the options do not hold, or hold in other units. (The `{}` let a
/// designated initializer leave fields out without -Wmissing-field-initializers.)
struct BatchExportSources {
  std::string data{};  ///< "data": the training pairs, a file or e.g. "task:reverse"
  std::string dev{};   ///< "dev": the dev pairs' file ("" = none)
  /// "max_minutes": the time limit as the user gave it, so that a reader's max_minutes * 60 is
  /// options.max_seconds() exactly (it must be); unset = options.max_seconds() / 60.
  std::optional<double> max_minutes{};
};

/// What write_training_batches wrote.
struct BatchExport {
  std::int64_t steps = 0;   ///< steps of the plan
  std::int64_t epochs = 0;  ///< epoch of its last step (0 = no step)
};

/// Writes what train(model, data, options) would train on into `dir` (created if needed; see the
/// file comment), training nothing. Throws std::invalid_argument for invalid options, an empty
/// training set or a max_minutes that is not options.max_seconds(), std::runtime_error naming the
/// path on a write failure.
BatchExport write_training_batches(const std::string& dir, const Seq2Seq& model, const TranslationData& data,
                                   const TrainOptions& options, const BatchExportSources& sources);

}  // namespace tg::models
