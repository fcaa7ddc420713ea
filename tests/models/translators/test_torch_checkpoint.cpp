// A checkpoint written from PyTorch (tests/data/make_d2l_checkpoint.py, d2l's classes) loads and
// gives PyTorch's logits, attention and greedy translations.
#include <gtest/gtest.h>

#include <map>

#include "../../nn/layer_test_util.h"
#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "models/decoding/decode.h"
#include "models/training/checkpoint.h"
#include "nn/serialize.h"

using namespace tg;
using namespace tg::models;
using tg::nn::testing::max_abs_diff;

namespace {
std::map<std::string, Tensor> expected() {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : nn::load_npz(TG_TEST_DATA_DIR "/d2l_torch_expected.npz")) out[name] = t;
  return out;
}
}  // namespace

TEST(TorchCheckpoint, D2lModelGivesPyTorchLogitsAndAttention) {
  Checkpoint ck = load_checkpoint(TG_TEST_DATA_DIR "/d2l_torch_ckpt");
  auto ex = expected();
  ck.model->eval();
  NoGradGuard no_grad;
  // float64 with the float32 weights PyTorch used: agreement to rounding error.
  ck.model->to(DType::f64);
  Tensor attention;
  const Tensor logits = ck.model->forward(ex["src"], ex["src_valid_len"], ex["dec_input"], &attention);
  EXPECT_LT(max_abs_diff(logits, ex["logits"].to(DType::f64)), 1e-9);
  EXPECT_LT(max_abs_diff(attention, ex["attention"].to(DType::f64)), 1e-9);
  // float32, as used for training and translation.
  ck.model->to(DType::f32);
  const Tensor logits32 = ck.model->forward(ex["src"], ex["src_valid_len"], ex["dec_input"]);
  EXPECT_LT(max_abs_diff(logits32.to(DType::f64), ex["logits"].to(DType::f64)), 1e-4);
}

TEST(TorchCheckpoint, D2lGreedyTranslationsMatchPredictSeq2Seq) {
  Checkpoint ck = load_checkpoint(TG_TEST_DATA_DIR "/d2l_torch_ckpt");
  auto ex = expected();
  const std::vector<std::string> sentences = {"go .", "i lost .", "he's calm .", "i'm home .", "go home !"};
  const auto out = translate(*ck.model, sentences, ck.src_vocab, ck.tgt_vocab);
  ASSERT_EQ(out.size(), sentences.size());
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    SCOPED_TRACE(sentences[i]);
    EXPECT_EQ(out[i].ids, ex["greedy_" + std::to_string(i)].to_vector<std::int64_t>());
  }
}
