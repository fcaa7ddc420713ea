#pragma once
// The registry of translation models: the one list that the command line, checkpoints, tests and
// experiments read. Adding a model: a file in models/translators/ that implements Seq2Seq and defines
// its ModelSpec, plus its line in registry.cpp (docs/extending.md, "Adding a translation model").
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "models/translators/seq2seq.h"

namespace tg::models {

struct ModelSpec {
  std::string_view name;         ///< as on the command line and in config.json
  std::string_view description;  ///< one line, for --help
  /// Builds the model from a validated config.
  std::shared_ptr<Seq2Seq> (*make)(const ModelConfig& config, Generator& gen);
  /// The model's own rules on top of ModelConfig::validate's, or null. Throws std::invalid_argument
  /// naming the field, without a prefix (ModelConfig::validate adds where the config came from).
  void (*validate)(const ModelConfig& config);
  /// num_layers when the user does not give one.
  std::int64_t default_num_layers;
  /// The exact number of parameters make() would create, computed from a config whose fields are
  /// in range (limits.h), without allocating: ModelConfig::validate refuses configs above
  /// limits::kMaxParameters with it. Null: no total limit is checked for this model.
  std::int64_t (*num_parameters)(const ModelConfig& config) = nullptr;
};

/// Every registered model, in a fixed order (the first is the default).
const std::vector<const ModelSpec*>& model_registry();

/// The model registered as `name`; std::invalid_argument listing the names if there is none.
const ModelSpec& find_model(std::string_view name);

}  // namespace tg::models
