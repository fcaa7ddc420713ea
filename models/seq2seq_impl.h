#pragma once
// Internal: the factories behind make_model(), one per model file.
#include <memory>

#include "models/seq2seq.h"

namespace tg::models {
std::shared_ptr<Seq2Seq> make_d2l_model(const ModelConfig& config, Generator& gen);
std::shared_ptr<Seq2Seq> make_rnnsearch_model(const ModelConfig& config, Generator& gen);
std::shared_ptr<Seq2Seq> make_rnnencdec_model(const ModelConfig& config, Generator& gen);
}  // namespace tg::models
