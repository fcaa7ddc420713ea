// GRUCell, GRU, LSTMCell, LSTM: PyTorch names/shapes/init, hand-written formulas, valid-length
// semantics (padded batch == each sequence alone), float64 gradchecks w.r.t. inputs and weights.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "../autograd/error_of.h"
#include "layer_test_util.h"
#include "nn/rnn.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;
using tg::nn::GRU;
using tg::nn::GRUCell;
using tg::nn::GRUOptions;
using tg::nn::LSTM;
using tg::nn::LSTMCell;
using tg::nn::LSTMOptions;
using tg::nn::LSTMState;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::flat_concat;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

Tensor lens_of(const std::vector<std::int64_t>& v) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
}

/// Deterministic "fixed numbers" for weights: 0.4 sin(1.3 i + phase).
Tensor fixed(const Shape& shape, double phase, DType dtype = DType::f64) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.4 * std::sin(1.3 * static_cast<double>(i) + phase);
  return Tensor::from_values(v, shape, dtype);
}

double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// W (rows, cols) x (cols) + b, from raw values.
std::vector<double> affine(const Tensor& W, const Tensor& b, const std::vector<double>& x) {
  const std::int64_t rows = W.size(0), cols = W.size(1);
  std::vector<double> y(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = b.at({r});
    for (std::int64_t c = 0; c < cols; ++c) s += W.at({r, c}) * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> row(const Tensor& t, std::int64_t i) {
  std::vector<double> r;
  for (std::int64_t j = 0; j < t.size(1); ++j) r.push_back(t.at({i, j}));
  return r;
}

TEST(Rnn, GRUParameterNamesShapesAndInit) {
  Generator gen(1);
  GRU gru(GRUOptions(3, 4).num_layers(2).bidirectional(true), gen);
  const std::vector<std::pair<std::string, Shape>> want = {
      {"weight_ih_l0", {12, 3}},         {"weight_hh_l0", {12, 4}},         {"bias_ih_l0", {12}},
      {"bias_hh_l0", {12}},              {"weight_ih_l0_reverse", {12, 3}}, {"weight_hh_l0_reverse", {12, 4}},
      {"bias_ih_l0_reverse", {12}},      {"bias_hh_l0_reverse", {12}},      {"weight_ih_l1", {12, 8}},
      {"weight_hh_l1", {12, 4}},         {"bias_ih_l1", {12}},              {"bias_hh_l1", {12}},
      {"weight_ih_l1_reverse", {12, 8}}, {"weight_hh_l1_reverse", {12, 4}}, {"bias_ih_l1_reverse", {12}},
      {"bias_hh_l1_reverse", {12}}};
  const auto named = gru->named_parameters();
  ASSERT_EQ(named.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(named[i].first, want[i].first);
    EXPECT_EQ(named[i].second.shape(), want[i].second) << want[i].first;
    double lo = 1, hi = -1;
    for (double v : named[i].second.to_vector<double>()) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_GE(lo, -0.5) << want[i].first;  // U(-1/sqrt(H), 1/sqrt(H)), H = 4
    EXPECT_LT(hi, 0.5) << want[i].first;
    EXPECT_GT(hi - lo, 0.25) << want[i].first;
  }
  EXPECT_EQ(gru->str(), "GRU(3, 4, num_layers=2, bidirectional=true)");

  LSTM lstm(LSTMOptions(3, 5).bias(false), gen);
  const auto ln = lstm->named_parameters();
  ASSERT_EQ(ln.size(), 2u);
  EXPECT_EQ(ln[0].first, "weight_ih_l0");
  EXPECT_EQ(ln[0].second.shape(), (Shape{20, 3}));
  EXPECT_EQ(ln[1].first, "weight_hh_l0");
  EXPECT_EQ(ln[1].second.shape(), (Shape{20, 5}));

  GRUCell cell(3, 4, gen);
  const auto cn = cell->named_parameters();
  ASSERT_EQ(cn.size(), 4u);
  EXPECT_EQ(cn[0].first, "weight_ih");
  EXPECT_EQ(cn[1].first, "weight_hh");
  EXPECT_EQ(cn[2].first, "bias_ih");
  EXPECT_EQ(cn[3].first, "bias_hh");
  EXPECT_EQ(cn[1].second.shape(), (Shape{12, 4}));
  LSTMCell lcell(3, 4, gen);
  EXPECT_EQ(lcell->weight_ih.shape(), (Shape{16, 3}));
}

TEST(Rnn, OptionsAndInputsAreValidated) {
  using tg::testing::error_of;
  using E = std::invalid_argument;
  Generator gen(2);
  EXPECT_EQ(error_of<E>([&] { GRU(GRUOptions(0, 4), gen); }), "GRU: input_size must be positive, got 0");
  EXPECT_EQ(error_of<E>([&] { GRU(GRUOptions(3, 4).num_layers(0), gen); }), "GRU: num_layers must be at least 1, got 0");
  EXPECT_EQ(error_of<E>([&] { LSTM(LSTMOptions(3, 4).dropout(1.0), gen); }), "LSTM: dropout must be in [0, 1), got 1.000000");
  GRU gru(GRUOptions(3, 4).num_layers(2), gen);
  EXPECT_EQ(error_of<E>([&] { gru->forward(Tensor::zeros({5, 2, 4})); }),  // wrong feature size
            "GRU: input must be (T, B, 3), got [5, 2, 4]");
  EXPECT_EQ(error_of<E>([&] { gru->forward(Tensor::zeros({5, 3})); }),  // not 3-D
            "GRU: input must be (T, B, 3), got [5, 3]");
  EXPECT_EQ(error_of<E>([&] { gru->forward(Tensor::zeros({5, 2, 3}), Tensor::zeros({1, 2, 4})); }),
            "GRU: initial state must be float32 [2, 2, 4] (num_layers * directions, B, hidden_size), got float32 [1, 2, 4]");
  EXPECT_EQ(error_of<E>([&] { gru->forward(Tensor::zeros({5, 2, 3}), Tensor(), lens_of({6, 1})); }),
            "GRU: valid length 6 is outside [0, 5]");
  EXPECT_EQ(error_of<E>([&] { gru->forward(Tensor::zeros({5, 2, 3}), Tensor(), lens_of({5})); }),
            "GRU: valid_lens must be i64 of shape [2], got int64 [1]");
  EXPECT_EQ(error_of<E>([&] { gru->forward(Tensor::zeros({5, 2, 3}, DType::f64)); }),
            "GRU: input is float64 but the parameters are float32");
}

TEST(Rnn, GRUCellMatchesHandWrittenFormula) {
  Generator gen(3);
  GRUCell cell(2, 3, gen);
  cell->to(DType::f64);
  cell->weight_ih.copy_(fixed({9, 2}, 0.1));
  cell->weight_hh.copy_(fixed({9, 3}, 0.7));
  cell->bias_ih.copy_(fixed({9}, 1.9));
  cell->bias_hh.copy_(fixed({9}, 2.3));
  const Tensor x = Tensor::from_values({0.5, -1.0, 1.5, 0.25}, {2, 2}, DType::f64);
  const Tensor h = Tensor::from_values({0.1, -0.2, 0.3, 0.6, 0.0, -0.4}, {2, 3}, DType::f64);
  const Tensor y = cell->forward(x, h);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto gi = affine(cell->weight_ih, cell->bias_ih, row(x, b));
    const auto gh = affine(cell->weight_hh, cell->bias_hh, row(h, b));
    for (std::int64_t j = 0; j < 3; ++j) {
      const double r = sigm(gi[j] + gh[j]), z = sigm(gi[3 + j] + gh[3 + j]);
      const double n = std::tanh(gi[6 + j] + r * gh[6 + j]);
      EXPECT_NEAR(y.at({b, j}), (1 - z) * n + z * h.at({b, j}), 1e-14);
    }
  }
  // Zero initial state when h is undefined; unbatched input.
  EXPECT_LT(max_abs_diff(cell->forward(x), cell->forward(x, Tensor::zeros({2, 3}, DType::f64))), 1e-15);
  const Tensor x0 = tg::narrow(x, 0, 1, 1), h0 = tg::narrow(h, 0, 1, 1);
  EXPECT_LT(max_abs_diff(cell->forward(tg::squeeze(x0, 0), tg::squeeze(h0, 0)), tg::squeeze(cell->forward(x0, h0), 0)),
            1e-15);
}

TEST(Rnn, LSTMCellMatchesHandWrittenFormula) {
  Generator gen(4);
  LSTMCell cell(2, 3, gen);
  cell->to(DType::f64);
  cell->weight_ih.copy_(fixed({12, 2}, 0.3));
  cell->weight_hh.copy_(fixed({12, 3}, 1.1));
  cell->bias_ih.copy_(fixed({12}, 0.5));
  cell->bias_hh.copy_(fixed({12}, 2.9));
  const Tensor x = Tensor::from_values({0.5, -1.0, 1.5, 0.25}, {2, 2}, DType::f64);
  const Tensor h = Tensor::from_values({0.1, -0.2, 0.3, 0.6, 0.0, -0.4}, {2, 3}, DType::f64);
  const Tensor c = Tensor::from_values({1.0, -0.5, 0.2, -1.2, 0.7, 0.05}, {2, 3}, DType::f64);
  const LSTMState s = cell->forward(x, {h, c});
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto gi = affine(cell->weight_ih, cell->bias_ih, row(x, b));
    const auto gh = affine(cell->weight_hh, cell->bias_hh, row(h, b));
    for (std::int64_t j = 0; j < 3; ++j) {
      const double i = sigm(gi[j] + gh[j]), f = sigm(gi[3 + j] + gh[3 + j]);
      const double g = std::tanh(gi[6 + j] + gh[6 + j]), o = sigm(gi[9 + j] + gh[9 + j]);
      const double c2 = f * c.at({b, j}) + i * g;
      EXPECT_NEAR(s.c.at({b, j}), c2, 1e-14);
      EXPECT_NEAR(s.h.at({b, j}), o * std::tanh(c2), 1e-14);
    }
  }
}

TEST(Rnn, SequenceOfLengthOneEqualsCell) {
  Generator gen(5);
  GRUCell cell(3, 4, gen);
  GRU gru(GRUOptions(3, 4), gen);
  cell->to(DType::f64);
  gru->to(DType::f64);
  gru->load_state_dict({{"weight_ih_l0", cell->weight_ih}, {"weight_hh_l0", cell->weight_hh},
                        {"bias_ih_l0", cell->bias_ih}, {"bias_hh_l0", cell->bias_hh}});
  const Tensor x = Tensor::uniform({1, 2, 3}, -1, 1, gen, DType::f64);
  const Tensor h0 = Tensor::uniform({1, 2, 4}, -1, 1, gen, DType::f64);
  auto [out, h_n] = gru->forward(x, h0);
  const Tensor want = cell->forward(tg::squeeze(x, 0), tg::squeeze(h0, 0));
  EXPECT_LT(max_abs_diff(tg::squeeze(out, 0), want), 1e-14);
  EXPECT_LT(max_abs_diff(tg::squeeze(h_n, 0), want), 1e-14);

  LSTMCell lcell(3, 4, gen);
  LSTM lstm(LSTMOptions(3, 4), gen);
  lcell->to(DType::f64);
  lstm->to(DType::f64);
  lstm->load_state_dict({{"weight_ih_l0", lcell->weight_ih}, {"weight_hh_l0", lcell->weight_hh},
                         {"bias_ih_l0", lcell->bias_ih}, {"bias_hh_l0", lcell->bias_hh}});
  const Tensor c0 = Tensor::uniform({1, 2, 4}, -1, 1, gen, DType::f64);
  auto [lout, state] = lstm->forward(x, {h0, c0});
  const LSTMState ls = lcell->forward(tg::squeeze(x, 0), {tg::squeeze(h0, 0), tg::squeeze(c0, 0)});
  EXPECT_LT(max_abs_diff(tg::squeeze(lout, 0), ls.h), 1e-14);
  EXPECT_LT(max_abs_diff(tg::squeeze(state.h, 0), ls.h), 1e-14);
  EXPECT_LT(max_abs_diff(tg::squeeze(state.c, 0), ls.c), 1e-14);
}

/// Runs the layer on the padded batch with valid lengths and on each sequence alone, unpadded.
/// run(x, b, lens): b = -1 for the whole batch, else the batch entry (for slicing initial states).
template <class Run>
void expect_padded_equals_alone(const Tensor& x, const std::vector<std::int64_t>& lens, Run run) {
  const std::int64_t T = x.size(0);
  const auto [out, states] = run(x, -1, lens_of(lens));
  for (std::size_t b = 0; b < lens.size(); ++b) {
    const std::int64_t len = lens[b], bi = static_cast<std::int64_t>(b);
    const Tensor xb = tg::narrow(tg::narrow(x, 1, bi, 1), 0, 0, len);
    const auto [out_b, states_b] = run(xb, bi, Tensor());
    EXPECT_LT(max_abs_diff(tg::narrow(tg::narrow(out, 1, bi, 1), 0, 0, len), out_b), 1e-13) << "entry " << b;
    for (std::size_t s = 0; s < states.size(); ++s)
      EXPECT_LT(max_abs_diff(tg::narrow(states[s], 1, bi, 1), states_b[s]), 1e-13) << "entry " << b << " state " << s;
    if (len < T) {  // padded outputs are exactly zero
      const Tensor pad = tg::narrow(tg::narrow(out, 1, bi, 1), 0, len, T - len);
      for (double v : pad.to_vector<double>()) EXPECT_EQ(v, 0.0) << "entry " << b;
    }
  }
}

Tensor entry(const Tensor& state, std::int64_t b) { return b < 0 ? state : tg::narrow(state, 1, b, 1); }

TEST(Rnn, ValidLensMatchEachSequenceAloneGRU) {
  Generator gen(6);
  GRU gru(GRUOptions(3, 4).num_layers(2).bidirectional(true), gen);
  gru->to(DType::f64);
  const Tensor x = Tensor::uniform({6, 4, 3}, -1, 1, gen, DType::f64);
  const Tensor h0 = Tensor::uniform({4, 4, 4}, -1, 1, gen, DType::f64);
  expect_padded_equals_alone(x, {6, 2, 4, 1}, [&](const Tensor& xx, std::int64_t b, const Tensor& lens) {
    auto [o, h] = gru->forward(xx, entry(h0, b), lens);
    return std::pair<Tensor, std::vector<Tensor>>{o, {h}};
  });
}

TEST(Rnn, ValidLensMatchEachSequenceAloneLSTM) {
  Generator gen(7);
  LSTM lstm(LSTMOptions(3, 4).num_layers(2).bidirectional(true), gen);
  lstm->to(DType::f64);
  const Tensor x = Tensor::uniform({5, 3, 3}, -1, 1, gen, DType::f64);
  const Tensor h0 = Tensor::uniform({4, 3, 4}, -1, 1, gen, DType::f64);
  const Tensor c0 = Tensor::uniform({4, 3, 4}, -1, 1, gen, DType::f64);
  expect_padded_equals_alone(x, {3, 5, 1}, [&](const Tensor& xx, std::int64_t b, const Tensor& lens) {
    auto [o, s] = lstm->forward(xx, {entry(h0, b), entry(c0, b)}, lens);
    return std::pair<Tensor, std::vector<Tensor>>{o, {s.h, s.c}};
  });
}

TEST(Rnn, WithoutValidLensEveryStepRuns) {
  Generator gen(8);
  GRU gru(GRUOptions(2, 3).bidirectional(true), gen);
  const Tensor x = Tensor::uniform({4, 2, 2}, -1, 1, gen);
  auto [out, h] = gru->forward(x);
  auto [out_full, h_full] = gru->forward(x, Tensor(), lens_of({4, 4}));
  EXPECT_EQ(max_abs_diff(out, out_full), 0.0);
  EXPECT_EQ(max_abs_diff(h, h_full), 0.0);
  // The reverse direction's h_n is its state after t = 0, i.e. its output at t = 0.
  EXPECT_EQ(max_abs_diff(tg::narrow(h, 0, 1, 1), tg::narrow(tg::narrow(out, 0, 0, 1), 2, 3, 3)), 0.0);
  // The forward direction's h_n is its output at the last step.
  EXPECT_EQ(max_abs_diff(tg::narrow(h, 0, 0, 1), tg::narrow(tg::narrow(out, 0, 3, 1), 2, 0, 3)), 0.0);
}

TEST(Rnn, BatchFirstIsTransposedTimeMajor) {
  Generator gen(9);
  GRU tm(GRUOptions(2, 3).num_layers(2), gen);
  Generator gen2(9);
  GRU bf(GRUOptions(2, 3).num_layers(2).batch_first(true), gen2);
  const Tensor x = Tensor::uniform({4, 2, 2}, -1, 1, gen);
  const Tensor lens = lens_of({3, 4});
  auto [o1, h1] = tm->forward(x, Tensor(), lens);
  auto [o2, h2] = bf->forward(tg::transpose(x, 0, 1), Tensor(), lens);
  EXPECT_EQ(o2.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(max_abs_diff(tg::transpose(o2, 0, 1), o1), 0.0);
  EXPECT_EQ(max_abs_diff(h1, h2), 0.0);
}

TEST(Rnn, DropoutOnlyBetweenLayers) {
  Generator gen(10);
  const Tensor x = Tensor::uniform({3, 2, 2}, -1, 1, gen);
  GRU one(GRUOptions(2, 3).dropout(0.5), gen);  // no layer after the only one: no effect
  auto [o_train, h_train] = one->forward(x);
  one->eval();
  EXPECT_EQ(max_abs_diff(o_train, one->forward(x).first), 0.0);

  auto shared = std::make_shared<Generator>(123);
  GRU two(GRUOptions(2, 3).num_layers(2).dropout(0.5).generator(shared), gen);
  EXPECT_EQ(two->generator(), shared);
  shared->seed(1);
  const Tensor a = two->forward(x).first;
  shared->seed(1);
  EXPECT_EQ(max_abs_diff(a, two->forward(x).first), 0.0);  // masks come from the shared generator
  two->eval();
  EXPECT_GT(max_abs_diff(a, two->forward(x).first), 1e-4);  // training applied a mask
}

// ---- float64 gradchecks w.r.t. input, initial state and every weight -------------------------------

TEST(Rnn, GRUGradcheckTwoLayersBidirectional) {
  Generator gen(11);
  GRU gru(GRUOptions(2, 2).num_layers(2).bidirectional(true), gen);
  gru->to(DType::f64);
  std::vector<Tensor> inputs{tg::testing::rand64({3, 2, 2}, gen), tg::testing::rand64({4, 2, 2}, gen)};
  for (const Tensor& p : parameter_inputs(gru)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(gru, xs, 2);
        auto [out, h_n] = gru->forward(xs[0], xs[1]);
        return flat_concat({out, h_n});
      },
      inputs);
}

TEST(Rnn, GRUGradcheckValidLens) {
  Generator gen(12);
  GRU gru(GRUOptions(2, 2).num_layers(2).bidirectional(true).batch_first(true), gen);
  gru->to(DType::f64);
  const Tensor lens = lens_of({3, 1, 2});  // includes a length equal to T
  std::vector<Tensor> inputs{tg::testing::rand64({3, 3, 2}, gen), tg::testing::rand64({4, 3, 2}, gen)};
  for (const Tensor& p : parameter_inputs(gru)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(gru, xs, 2);
        auto [out, h_n] = gru->forward(xs[0], xs[1], lens);
        return flat_concat({out, h_n});
      },
      inputs);
}

TEST(Rnn, LSTMGradcheckTwoLayersBidirectional) {
  Generator gen(13);
  LSTM lstm(LSTMOptions(2, 2).num_layers(2).bidirectional(true), gen);
  lstm->to(DType::f64);
  std::vector<Tensor> inputs{tg::testing::rand64({3, 2, 2}, gen), tg::testing::rand64({4, 2, 2}, gen),
                             tg::testing::rand64({4, 2, 2}, gen)};
  for (const Tensor& p : parameter_inputs(lstm)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(lstm, xs, 3);
        auto [out, s] = lstm->forward(xs[0], {xs[1], xs[2]});
        return flat_concat({out, s.h, s.c});
      },
      inputs);
}

TEST(Rnn, LSTMGradcheckValidLens) {
  Generator gen(14);
  LSTM lstm(LSTMOptions(2, 2).num_layers(2).bidirectional(true), gen);
  lstm->to(DType::f64);
  const Tensor lens = lens_of({2, 3, 1});
  std::vector<Tensor> inputs{tg::testing::rand64({3, 3, 2}, gen), tg::testing::rand64({4, 3, 2}, gen),
                             tg::testing::rand64({4, 3, 2}, gen)};
  for (const Tensor& p : parameter_inputs(lstm)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(lstm, xs, 3);
        auto [out, s] = lstm->forward(xs[0], {xs[1], xs[2]}, lens);
        return flat_concat({out, s.h, s.c});
      },
      inputs);
}

TEST(Rnn, CellGradchecks) {
  Generator gen(15);
  GRUCell gcell(3, 2, gen);
  gcell->to(DType::f64);
  std::vector<Tensor> inputs{tg::testing::rand64({2, 3}, gen), tg::testing::rand64({2, 2}, gen)};
  for (const Tensor& p : parameter_inputs(gcell)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(gcell, xs, 2);
        return gcell->forward(xs[0], xs[1]);
      },
      inputs);
  LSTMCell lcell(3, 2, gen);
  lcell->to(DType::f64);
  inputs = {tg::testing::rand64({2, 3}, gen), tg::testing::rand64({2, 2}, gen), tg::testing::rand64({2, 2}, gen)};
  for (const Tensor& p : parameter_inputs(lcell)) inputs.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(lcell, xs, 3);
        const LSTMState s = lcell->forward(xs[0], {xs[1], xs[2]});
        return flat_concat({s.h, s.c});
      },
      inputs);
}

}  // namespace
