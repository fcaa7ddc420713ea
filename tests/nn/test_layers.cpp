// Linear, Embedding, Dropout: PyTorch names, shapes and initialisation; values; float64 gradchecks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "../autograd/error_of.h"
#include "layer_test_util.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::Dropout;
using tg::nn::Embedding;
using tg::nn::Linear;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

TEST(Layers, LinearNamesShapesAndInitBounds) {
  Generator gen(1);
  Linear fc(16, 5, gen);
  const auto named = fc->named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].first, "weight");
  EXPECT_EQ(named[0].second.shape(), (tg::Shape{5, 16}));
  EXPECT_EQ(named[1].first, "bias");
  EXPECT_EQ(named[1].second.shape(), (tg::Shape{5}));
  const double bound = 1.0 / std::sqrt(16.0);
  for (const auto& [name, p] : named) {
    double lo = 1, hi = -1;
    for (double v : p.to_vector<double>()) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_GE(lo, -bound) << name;
    EXPECT_LT(hi, bound) << name;
    EXPECT_GT(hi - lo, bound / 2) << name;  // really drawn, not constant
  }
  Linear no_bias(4, 3, gen, false);
  ASSERT_EQ(no_bias->named_parameters().size(), 1u);
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(fc->str(), "Linear(in_features=16, out_features=5, bias=true)");
  EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([&] { Linear(0, 3, gen); }),
            "Linear: in_features and out_features must be positive, got 0 and 3");
  EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([&] { fc->forward(Tensor::zeros({2, 15})); }),
            "Linear: input of shape [2, 15] does not end in in_features=16");
}

TEST(Layers, LinearValueMatchesFormula) {
  Generator gen(2);
  Linear fc(3, 2, gen);
  const Tensor x = Tensor::from_values({1, 2, 3, -1, 0.5, 0}, {2, 3}, DType::f32);
  const Tensor y = fc->forward(x);
  ASSERT_EQ(y.shape(), (tg::Shape{2, 2}));
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 2; ++o) {
      double want = fc->bias.at({o});
      for (int k = 0; k < 3; ++k) want += x.at({i, k}) * fc->weight.at({o, k});
      EXPECT_NEAR(y.at({i, o}), want, 1e-6);
    }
}

TEST(Layers, LinearGradcheck) {
  Generator gen(3);
  Linear fc(3, 4, gen);
  fc->to(DType::f64);
  std::vector<Tensor> inputs{tg::testing::rand64({2, 5, 3}, gen)};
  for (const Tensor& p : parameter_inputs(fc)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(fc, xs, 1);
        return fc->forward(xs[0]);
      },
      inputs);
}

TEST(Layers, EmbeddingInitAndPaddingRow) {
  Generator gen(4);
  Embedding emb(200, 50, gen, 3);
  ASSERT_EQ(emb->named_parameters().size(), 1u);
  EXPECT_EQ(emb->named_parameters()[0].first, "weight");
  EXPECT_EQ(emb->weight.shape(), (tg::Shape{200, 50}));
  const std::vector<double> w = emb->weight.to_vector<double>();
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i / 50 == 3) {
      EXPECT_EQ(w[i], 0.0);
      continue;
    }
    sum += w[i], sq += w[i] * w[i];
  }
  const double n = 199 * 50, mean = sum / n, stdev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.05);  // N(0, 1): 9950 draws, standard error 0.01
  EXPECT_NEAR(stdev, 1.0, 0.05);
  EXPECT_EQ(*Embedding(10, 2, gen, -1)->padding_idx(), 9);  // negative counts from the end
  EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([&] { Embedding(10, 2, gen, 10); }),
            "Embedding: padding_idx 10 is out of range for num_embeddings=10");
  // Thrown by tg::embedding (autograd/ops_index.cpp) as std::out_of_range.
  EXPECT_EQ(tg::testing::error_of<std::out_of_range>([&] { emb->forward(Tensor::from_vector(std::vector<std::int64_t>{200}, {1})); }),
            "embedding: index 200 is out of range for axis 0 of size 200 (shape [200, 50])");
}

TEST(Layers, EmbeddingGradcheckRepeatedIndices) {
  Generator gen(5);
  Embedding emb(5, 3, gen);
  emb->to(DType::f64);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{1, 3, 1, 0, 1, 4}, {2, 3});
  const Tensor y = emb->forward(ids);
  ASSERT_EQ(y.shape(), (tg::Shape{2, 3, 3}));
  EXPECT_EQ(y.at({1, 1, 2}), emb->weight.at({1, 2}));
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(emb, xs, 0);
        return emb->forward(ids);
      },
      parameter_inputs(emb));
}

TEST(Layers, EmbeddingPaddingRowGetsNoGradient) {
  Generator gen(6);
  Embedding emb(4, 3, gen, 0);
  emb->to(DType::f64);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 0, 1, 2}, {5});
  const Tensor y = emb->forward(ids);
  EXPECT_EQ(y.at({1, 0}), 0.0);  // the padding row is zero, and stays what the weight holds
  const Tensor seed = Tensor::uniform({5, 3}, 0.5, 1.0, gen, DType::f64);
  y.backward(seed);
  const Tensor g = emb->weight.grad();
  ASSERT_TRUE(g.defined());
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(g.at({0, j}), 0.0);  // padding_idx: no gradient, as PyTorch
    EXPECT_DOUBLE_EQ(g.at({2, j}), seed.at({0, j}) + seed.at({4, j}));  // repeats add up
    EXPECT_DOUBLE_EQ(g.at({1, j}), seed.at({3, j}));
    EXPECT_EQ(g.at({3, j}), 0.0);
  }
}

TEST(Layers, DropoutTrainEvalAndGenerator) {
  auto gen = std::make_shared<Generator>(7);
  Dropout drop(0.25, gen);
  EXPECT_EQ(drop->generator(), gen);
  const Tensor x = Tensor::ones({100, 100});
  const std::vector<float> y = drop->forward(x).to_vector<float>();
  int zeros = 0;
  for (float v : y) {
    if (v == 0.0f) ++zeros;
    else EXPECT_FLOAT_EQ(v, 1.0f / 0.75f);
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
  // Same seed, same mask: the masks come from the shared generator only.
  gen->seed(11);
  const Tensor a = drop->forward(x);
  gen->seed(11);
  EXPECT_EQ(max_abs_diff(a, drop->forward(x)), 0.0);
  drop->eval();
  EXPECT_EQ(max_abs_diff(drop->forward(x), x), 0.0);
  EXPECT_NE(Dropout(0.5)->generator(), nullptr);  // creates its own Generator(0)
  EXPECT_THROW(Dropout(1.0), std::invalid_argument);
  EXPECT_THROW(Dropout(-0.1), std::invalid_argument);
  EXPECT_EQ(drop->str(), "Dropout(p=0.25)");
}

TEST(Layers, DropoutGradcheckWithFixedSeed) {
  auto gen = std::make_shared<Generator>(8);
  Dropout drop(0.5, gen);
  Generator data(9);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        gen->seed(3);  // fn must be deterministic: the same mask on every call
        return drop->forward(xs[0]);
      },
      {tg::testing::rand64({4, 5}, data)});
}

}  // namespace
