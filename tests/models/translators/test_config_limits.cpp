// Every numeric ModelConfig field is range-checked (models/translators/limits.h) where a config is
// parsed (config.json) and built (ModelConfig::validate, make_model), with a message naming the
// field, its value and the allowed range.
#include <gtest/gtest.h>

#include <cmath>

#include <cstdint>
#include <limits>
#include <string>

#include "../../autograd/error_of.h"
#include "autograd/random.h"
#include "models/decoding/decode.h"
#include "models/training/checkpoint.h"
#include "models/translators/limits.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"

using namespace tg;
using namespace tg::models;
using tg::testing::error_of;

namespace {

std::string config_error(const std::string& text) {
  return error_of([&] { config_from_json(text, "ck/config.json"); });
}

std::string make_error(const ModelConfig& c) {
  return error_of<std::invalid_argument>([&] {
    Generator gen(0);
    make_model(c, gen);
  });
}

std::string range(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

ModelConfig small(const std::string& model) {
  ModelConfig c;
  c.model = model;
  c.src_vocab = 11;
  c.tgt_vocab = 9;
  c.embed_size = 5;
  c.num_hiddens = 6;
  c.num_layers = model == "d2l" ? 3 : 1;
  c.num_heads = 5;  // transformer: a divisor of embed_size
  return c;
}

}  // namespace

TEST(ConfigLimits, EachFieldOutOfRangeIsRefusedNamingIt) {
  using namespace limits;
  constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();
  struct Case {
    std::string field;
    std::string value;  // as written in config.json
    std::string allowed;
  };
  const Case cases[] = {
      {"src_vocab", "3", range(kMinVocab, kMaxVocab)},
      {"src_vocab", std::to_string(kMaxVocab + 1), range(kMinVocab, kMaxVocab)},
      {"tgt_vocab", "-1", range(kMinVocab, kMaxVocab)},
      {"tgt_vocab", std::to_string(kHuge), range(kMinVocab, kMaxVocab)},
      {"embed_size", "0", range(1, kMaxWidth)},
      {"embed_size", std::to_string(kMaxWidth + 1), range(1, kMaxWidth)},
      {"num_hiddens", "-5", range(1, kMaxWidth)},
      {"num_hiddens", "99999999", range(1, kMaxWidth)},
      {"num_layers", "0", range(1, kMaxLayers)},
      {"num_layers", "1000000", range(1, kMaxLayers)},
      {"num_steps", "0", range(1, kMaxSteps)},
      {"num_steps", "1000000000", range(1, kMaxSteps)},
      {"maxout_units", "-1", range(0, kMaxWidth)},
      {"maxout_units", std::to_string(kHuge), range(0, kMaxWidth)},
      {"num_heads", "0", range(1, kMaxWidth)},
      {"num_heads", std::to_string(kHuge), range(1, kMaxWidth)},
      {"attention_layer", std::to_string(-kMaxLayers - 1), range(-kMaxLayers, kMaxLayers)},
      {"attention_head", "-2", range(-1, kMaxWidth)},
      {"dropout", "-0.5", "[0, 1)"},
      {"dropout", "1", "[0, 1)"},
      {"dropout", "1e300", "[0, 1)"},
      {"embedding_dropout", "1", "[0, 1)"},
      {"readout_dropout", "-0.5", "[0, 1)"},
  };
  for (const Case& c : cases) {
    // d2l takes num_layers > 1; the field under test is the only one out of range.
    const std::string text = R"({"model": "d2l", ")" + c.field + "\": " + c.value + "}";
    const std::string shown = c.field == "dropout" && c.value == "1e300" ? "1e+300" : c.value;
    EXPECT_EQ(config_error(text), "ck/config.json: " + c.field + " = " + shown + " is out of range " + c.allowed)
        << text;
  }
  // Beyond int64: refused as such, not wrapped to a negative size.
  EXPECT_EQ(config_error(R"({"num_hiddens": 18446744073709551615})"),
            "ck/config.json: 'num_hiddens' = 18446744073709551615 does not fit in a 64-bit signed integer");
}

TEST(ConfigLimits, ValidateAndMakeModelNameTheField) {
  ModelConfig c = small("rnnsearch");
  c.embed_size = limits::kMaxWidth + 1;
  EXPECT_EQ(make_error(c), "model config: embed_size = 65537 is out of range [1, 65536]");
  c = small("rnnsearch");
  c.dropout = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(make_error(c), "model config: dropout = nan is out of range [0, 1)");
  // embedding_dropout and readout_dropout belong to the models with the paper's deep output.
  for (const std::string model : {"d2l", "transformer"}) {
    c = small(model);
    c.readout_dropout = 0.1;
    EXPECT_TRUE(make_error(c).starts_with("model config: embedding_dropout and readout_dropout apply to rnnsearch and "
                                          "rnnencdec only"))
        << model;
  }
  // The model's own rules keep their text, with the same prefix.
  c = small("rnnsearch");
  c.num_layers = 2;
  EXPECT_EQ(make_error(c),
            "model config: rnnsearch has one recurrent layer, as in the paper (num_layers must be 1)");
}

// maxout_units near INT64_MAX made the readout's 2 * units a signed overflow (undefined behaviour)
// before any check.
TEST(ConfigLimits, MaxoutOverflowIsRefusedBeforeTheReadout) {
  for (const std::string model : {"rnnsearch", "rnnencdec"}) {
    ModelConfig c = small(model);
    c.maxout_units = std::numeric_limits<std::int64_t>::max() / 2 + 1;
    EXPECT_EQ(make_error(c), "model config: maxout_units = 4611686018427387904 is out of range [0, 65536]")
        << model;
  }
}

TEST(ConfigLimits, HugeLengthsAreRefused) {
  // A config asking for a billion-step sequence length.
  EXPECT_EQ(config_error(R"({"model": "rnnsearch", "num_layers": 1, "num_steps": 1000000000})"),
            "ck/config.json: num_steps = 1000000000 is out of range [1, 4096]");
  // The decoders' own maximum length.
  try {
    DecodeOptions().max_steps(1000000000).validate();
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "decode: max_steps = 1000000000 is out of range [0, 4096]");
  }
  EXPECT_NO_THROW(DecodeOptions().max_steps(limits::kMaxSteps).validate());
}

TEST(ConfigLimits, TooManyParametersInTotalAreRefused) {
  // Each field in range, their product not: 4M-token vocabularies of 65,536-wide embeddings.
  ModelConfig c = small("rnnsearch");
  c.src_vocab = c.tgt_vocab = limits::kMaxVocab;
  c.embed_size = limits::kMaxWidth;
  const std::string err = make_error(c);
  EXPECT_EQ(err.rfind("model config: the sizes give ", 0), 0u) << err;
  EXPECT_NE(err.find("parameters, more than the limit 2147483648"), std::string::npos) << err;
}

// The count the limit is checked on is the one the built model has.
TEST(ConfigLimits, ParameterCountMatchesTheBuiltModel) {
  for (const ModelSpec* spec : model_registry()) {
    ASSERT_NE(spec->num_parameters, nullptr) << spec->name;
    std::vector<ModelConfig> configs{small(std::string(spec->name))};
    ModelConfig c = configs.front();
    c.readout = Readout::linear;
    configs.push_back(c);
    c = configs.front();
    c.maxout_units = 7;
    configs.push_back(c);
    if (spec->name == "rnnsearch") {
      for (const AttentionScore a : option_values<AttentionScore>()) {
        c = configs.front();
        c.attention = a;
        configs.push_back(c);
      }
      for (const Ablation a : option_values<Ablation>()) {
        c = configs.front();
        c.ablation = a;
        configs.push_back(c);
      }
    }
    if (spec->name == "rnnsearch" || spec->name == "rnnencdec") {
      c = configs.front();
      c.maxout_units = c.embed_size;
      c.tie_embeddings = true;
      configs.push_back(c);
    }
    if (spec->name == "transformer") {
      for (const bool norm_first : {false, true})
        for (const bool tie : {false, true}) {
          c = configs.front();
          c.num_layers = 3;
          c.norm_first = norm_first;
          c.tie_embeddings = tie;
          configs.push_back(c);
        }
    }
    for (const ModelConfig& config : configs) {
      Generator gen(0);
      EXPECT_EQ(spec->num_parameters(config), make_model(config, gen)->num_parameters())
          << config_to_json(config);
    }
  }
}

namespace {
std::string training_error(const std::string& text) {
  return error_of([&] { training_from_json(text, "ck/training.json"); });
}
}  // namespace

// training.json's counts and rates feed the resume position and the command line's defaults.
TEST(ConfigLimits, TrainingStateFieldsAreRangeChecked) {
  using limits::kMaxBatchSize;
  using limits::kMaxCount;
  EXPECT_EQ(training_error(R"({"batch_size": 2000000000})"),
            "ck/training.json: batch_size = 2000000000 is out of range [0, " + std::to_string(kMaxBatchSize) + "]");
  EXPECT_EQ(training_error(R"({"step": -1})"), "ck/training.json: step = -1 is out of range [0, " + std::to_string(kMaxCount) + "]");
  EXPECT_EQ(training_error(R"({"batch_in_epoch": 9007199254740993})"),
            "ck/training.json: batch_in_epoch = 9007199254740993 is out of range [0, " + std::to_string(kMaxCount) + "]");
  EXPECT_EQ(training_error(R"({"lr": -0.5})"), "ck/training.json: lr = -0.500000 must be finite and >= 0");
  EXPECT_EQ(training_error(R"({"clip": 1e999})").rfind("ck/training.json: ", 0), 0u);
  EXPECT_EQ(training_error(R"({"elapsed_s": -3})"), "ck/training.json: elapsed_s = -3.000000 must be finite and >= 0");
  EXPECT_EQ(training_error(R"({"step": 5, "batch_size": 64, "lr": 0.001, "clip": 1, "elapsed_s": 2.5})"),
            "(no exception)");
  // The validation state (train --dev): counts within what was done, rates in their ranges.
  EXPECT_EQ(training_error(R"({"lr_scale": 0})"), "ck/training.json: lr_scale = 0.000000 is out of range (0, 1]");
  EXPECT_EQ(training_error(R"({"lr_scale": 1.5})"), "ck/training.json: lr_scale = 1.500000 is out of range (0, 1]");
  EXPECT_EQ(training_error(R"({"lr_decay": -1})"), "ck/training.json: lr_decay = -1.000000 is out of range (0, 1]");
  EXPECT_EQ(training_error(R"({"step": 4, "best_step": 9})"), "ck/training.json: best_step = 9 is out of range [0, 4]");
  EXPECT_EQ(training_error(R"({"validations": 2, "bad_validations": 3})"),
            "ck/training.json: bad_validations = 3 is out of range [0, 2]");
  EXPECT_EQ(training_error(R"({"batch_tokens": -5})"),
            "ck/training.json: batch_tokens = -5 is out of range [0, " + std::to_string(kMaxCount) + "]");
  EXPECT_EQ(training_error(R"({"select_by": "chrf"})"), "ck/training.json: select_by = 'chrf' is not 'bleu' or 'loss'");
  EXPECT_EQ(training_error(R"({"lr_anneal_from": 5, "lr_anneal_to": 5})"),
            "ck/training.json: lr_anneal_from = 5 is out of range [0, lr_anneal_to = 5)");
  EXPECT_EQ(training_error(R"({"lr_anneal_from": 3})"), "ck/training.json: lr_anneal_from = 3 is out of range [0, lr_anneal_to = 0)");
  EXPECT_EQ(training_error(R"({"lr_anneal_to": -1})"),
            "ck/training.json: lr_anneal_to = -1 is out of range [0, " + std::to_string(kMaxCount) + "]");
  EXPECT_EQ(training_error(R"({"lr_anneal_from": 3, "lr_anneal_to": 8})"), "(no exception)");
  EXPECT_EQ(training_error(R"({"best_dev_bleu": 101})"), "ck/training.json: best_dev_bleu = 101.000000 is out of range [0, 100]");
  EXPECT_EQ(training_error(R"({"step": 8, "validations": 3, "last_validation_step": 8, "best_step": 4, "best_dev_bleu": 12.5,
                               "best_dev_loss": 2.25, "bad_validations": 1, "lr_bad_validations": 0, "lr_scale": 0.5,
                               "select_by": "loss", "patience": 3, "lr_decay": 0.5, "lr_patience": 1,
                               "validate_every": 0, "batch_tokens": 4000})"),
            "(no exception)");
  // A round trip keeps every field.
  TrainingState st;
  st.step = 8;
  st.validations = 3;
  st.best_step = 4;
  st.best_dev_bleu = 12.5;
  st.best_dev_loss = 2.25;
  st.bad_validations = 2;
  st.lr_bad_validations = 1;
  st.lr_scale = 0.25;
  st.select_by = "loss";
  st.batch_tokens = 4000;
  st.lr_anneal_from = 3;
  st.lr_anneal_to = 8;
  const TrainingState back = training_from_json(training_to_json(st));
  EXPECT_EQ(training_to_json(back), training_to_json(st));  // every field, as written
  EXPECT_EQ(back.step, 8);
  EXPECT_EQ(back.validations, 3);
  EXPECT_EQ(back.best_step, 4);
  EXPECT_EQ(back.best_dev_loss, 2.25);
  EXPECT_EQ(back.bad_validations, 2);
  EXPECT_EQ(back.lr_anneal_from, 3);
  EXPECT_EQ(back.lr_anneal_to, 8);
  EXPECT_EQ(back.best_dev_bleu, 12.5);
  EXPECT_EQ(back.lr_scale, 0.25);
  EXPECT_EQ(back.select_by, "loss");
  EXPECT_EQ(back.batch_tokens, 4000);
  EXPECT_EQ(back.lr_bad_validations, 1);
  EXPECT_TRUE(std::isnan(training_from_json("{}").best_dev_bleu));  // none yet
}

TEST(ConfigLimits, BeamAndBatchOfDecodingAreBounded) {
  try {
    DecodeOptions().beam_size(1 << 30).validate();
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "decode: beam size = 1073741824 is out of range [1, 1024]");
  }
  EXPECT_NO_THROW(DecodeOptions().beam_size(limits::kMaxBeam).validate());
  EXPECT_THROW(DecodeOptions().batch_size(limits::kMaxBatchSize + 1).validate(), std::invalid_argument);
}
