// The --write-batches export: the batch plan from epoch_batch_rows, the encoded rows as .npz, the
// settings as meta.json and the initial model as a checkpoint.
#include "models/training/export_batches.h"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/training/checkpoint.h"
#include "models/translators/readout.h"
#include "nn/serialize.h"

namespace tg::models {

BatchExport write_training_batches(const std::string& dir_arg, const Seq2Seq& model, const TranslationData& data,
                                   const TrainOptions& options, const BatchExportSources& sources) {
  namespace fs = std::filesystem;
  options.validate();
  // With steps() the plan loop below would otherwise never end.
  if (data.train.size() == 0) throw std::invalid_argument("write_training_batches: the training set is empty");
  if (sources.max_minutes && *sources.max_minutes * 60.0 != options.max_seconds())
    throw std::invalid_argument("write_training_batches: max_minutes = " + std::to_string(*sources.max_minutes) +
                                " is not options.max_seconds() = " + std::to_string(options.max_seconds()) + " / 60");
  const fs::path dir(dir_arg);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir_arg + ": cannot create the directory (" + ec.message() + ")");

  // Every step's rows, concatenated; step k's are rows[offsets[k] : offsets[k + 1]].
  std::vector<std::int64_t> rows, offsets{0}, epochs;
  const std::int64_t steps = options.steps();
  auto full = [&] { return steps > 0 && static_cast<std::int64_t>(epochs.size()) >= steps; };
  for (std::int64_t e = 1; !full() && (steps > 0 || e <= options.epochs()); ++e) {
    for (const auto& batch : epoch_batch_rows(data.train, options, e)) {
      if (full()) break;
      rows.insert(rows.end(), batch.begin(), batch.end());
      offsets.push_back(static_cast<std::int64_t>(rows.size()));
      epochs.push_back(e);
    }
  }
  const BatchExport plan{static_cast<std::int64_t>(epochs.size()), epochs.empty() ? 0 : epochs.back()};

  const ModelConfig& config = model.config();
  auto i64 = [](const std::vector<std::int64_t>& v) {
    return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
  };
  std::vector<std::pair<std::string, Tensor>> entries{
      {"train_src", data.train.src()},         {"train_src_valid_len", data.train.src_valid_len()},
      {"train_tgt", data.train.tgt()},         {"train_tgt_valid_len", data.train.tgt_valid_len()},
      {"plan_rows", i64(rows)},                {"plan_offsets", i64(offsets)},
      {"plan_epoch", i64(epochs)}};
  const DevSet* dev = options.dev();
  if (dev) {
    const Seq2SeqDataset d(dev->pairs, data.src_vocab, data.tgt_vocab, config.num_steps);
    entries.insert(entries.end(), {{"dev_src", d.src()}, {"dev_src_valid_len", d.src_valid_len()},
                                   {"dev_tgt", d.tgt()}, {"dev_tgt_valid_len", d.tgt_valid_len()}});
    // The references dev BLEU compares with, as in train().
    std::string refs;
    for (const std::string& r : dev_references(*dev, dev->pairs.size())) refs += r + "\n";
    write_text((dir / "dev.ref.txt").string(), refs);
  }
  nn::save_npz((dir / "batches.npz").string(), entries);
  const SubwordModel* subword = options.subword() ? &*options.subword() : nullptr;
  save_checkpoint((dir / "init").string(), model, data.src_vocab, data.tgt_vocab, nullptr, nullptr, subword);

  // In this order in the file, for a reader's eyes; readers look keys up by name.
  nlohmann::ordered_json m;
  m["format"] = "tapegrad train --write-batches 1";
  m["model"] = std::string(config.model.name());
  m["embed_size"] = config.embed_size;
  m["num_hiddens"] = config.num_hiddens;
  m["num_layers"] = config.num_layers;
  m["dropout"] = config.dropout;
  m["embedding_dropout"] = config.embedding_dropout;
  m["readout_dropout"] = config.readout_dropout;
  m["readout"] = std::string(to_string(config.readout));
  m["maxout_units"] = maxout_units_of(config);
  m["attention"] = std::string(to_string(config.attention));
  m["ablation"] = std::string(to_string(config.ablation));
  m["num_steps"] = config.num_steps;
  m["src_vocab"] = data.src_vocab.size();
  m["tgt_vocab"] = data.tgt_vocab.size();
  m["num_parameters"] = model.num_parameters();
  m["padding_is_inert"] = model.padding_is_inert();
  m["unk"] = Vocab::kUnk;
  m["pad"] = Vocab::kPad;
  m["bos"] = Vocab::kBos;
  m["eos"] = Vocab::kEos;
  m["seed"] = options.seed();
  m["shuffle"] = options.shuffle();
  m["batch_size"] = options.batch_size();
  m["batch_tokens"] = options.batch_tokens();
  m["lr"] = options.lr();
  m["clip"] = options.clip();
  m["warmup_steps"] = options.warmup_steps();
  m["label_smoothing"] = options.label_smoothing();
  m["ema_decay"] = options.ema_decay();
  m["max_minutes"] = sources.max_minutes ? *sources.max_minutes : options.max_seconds() / 60.0;
  m["validate_every"] = dev ? options.validate_every() : 0;
  m["dev_bleu_pairs"] = dev ? options.dev_bleu_pairs() : 0;
  m["dev_beam"] = dev ? options.dev_decode().beam_size() : 1;
  m["dev_max_steps"] = config.num_steps;  // greedy dev decoding stops after num_steps tokens
  m["select_by"] = options.select_by() == SelectBy::kLoss ? "loss" : "bleu";
  m["patience"] = dev ? options.patience() : 0;
  m["lr_decay"] = dev ? options.lr_decay() : 1.0;
  m["lr_patience"] = options.lr_patience();
  m["data"] = sources.data;
  m["dev"] = sources.dev;
  m["subword"] = subword ? subword->size() : 0;
  m["train_rows"] = data.train.size();
  m["dev_rows"] = dev ? static_cast<std::int64_t>(dev->pairs.size()) : 0;
  m["plan_epochs"] = plan.epochs;
  m["plan_steps"] = plan.steps;
  // A path that is not UTF-8 is written with U+FFFD in place of its bad bytes rather than refused.
  write_text((dir / "meta.json").string(), m.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
  return plan;
}

}  // namespace tg::models
