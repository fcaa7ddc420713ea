#pragma once
// Setup shared by the training tests: a small reverse-task data set, a tiny model configuration,
// what a run leaves to compare (its losses, the final weights), and a guard for the thread count.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/training/trainer.h"
#include "models/translators/seq2seq.h"

namespace tg::models::testing {

/// `count` pairs of the reverse task (2..6 tokens, task seed `seed`), `num_steps` tokens a row.
inline TranslationData reverse_data(std::int64_t count, std::int64_t num_steps = 8, std::uint64_t seed = 3) {
  Generator gen(0);
  return make_translation_data(make_task("reverse", {.count = count, .min_len = 2, .max_len = 6, .seed = seed}),
                               TranslationDataOptions().num_steps(num_steps).min_freq(1), gen);
}

/// A small model of the given family for `data` (d2l: 2 layers, the others 1; dropout 0.1).
inline ModelConfig tiny_config(const TranslationData& data, const std::string& model = "d2l",
                               std::int64_t hidden = 16) {
  ModelConfig c;
  c.model = model;
  c.src_vocab = data.src_vocab.size();
  c.tgt_vocab = data.tgt_vocab.size();
  c.embed_size = hidden;
  c.num_hiddens = hidden;
  c.num_layers = model == "d2l" ? 2 : 1;
  c.dropout = 0.1;
  c.num_steps = data.train.num_steps();
  return c;
}

/// The loss of each step of a run.
inline std::vector<double> losses(const TrainResult& r) {
  std::vector<double> out;
  for (const auto& s : r.steps) out.push_back(s.loss);
  return out;
}

/// Every parameter's values, in the model's order.
inline std::vector<std::vector<float>> weights(const Seq2Seq& model) {
  std::vector<std::vector<float>> out;
  for (const auto& p : model.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

/// Sets the thread count back to the default when it goes out of scope.
struct ThreadReset {
  ~ThreadReset() { set_num_threads(0); }
};

}  // namespace tg::models::testing
