// Bool tensors in nn: MultiheadAttention's bool masks (true = may NOT attend, PyTorch 1.13) equal the
// i64 and additive float forms; bool tensors round-trip through .npy/.npz as numpy's '|b1'.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/ops_compare.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "nn/multihead_attention.h"
#include "nn/serialize.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;

Tensor bools(const std::vector<double>& v, const tg::Shape& s) { return Tensor::from_values(v, s, DType::b8); }

}  // namespace

TEST(BoolMasks, MultiheadAttentionMasksMatchI64AndFloat) {
  Generator gen(4);
  tg::nn::MultiheadAttention mha(tg::nn::MultiheadAttentionOptions{.embed_dim = 8, .num_heads = 2, .batch_first = true}, gen);
  mha->to(DType::f64);
  const Tensor q = Tensor::normal({2, 3, 8}, 0, 1, gen, DType::f64), kv = Tensor::normal({2, 4, 8}, 0, 1, gen, DType::f64);
  const Tensor kpm = bools({0, 0, 1, 1, 0, 0, 0, 1}, {2, 4});
  const Tensor am = tg::triu(Tensor::ones({3, 4}, DType::b8), 2);  // true = may not attend
  const auto [yb, wb] = mha->forward(q, kv, kv, kpm, true, am);
  const auto [yi, wi] = mha->forward(q, kv, kv, kpm.to(DType::i64), true, am.to(DType::i64));
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor am_float = tg::masked_fill(Tensor::zeros({3, 4}, DType::f64), am, -inf);
  const Tensor kpm_float = tg::masked_fill(Tensor::zeros({2, 4}, DType::f64), kpm, -inf);
  const auto [yf, wf] = mha->forward(q, kv, kv, kpm_float, true, am_float);
  EXPECT_EQ(yb.to_vector<double>(), yi.to_vector<double>());
  EXPECT_EQ(yb.to_vector<double>(), yf.to_vector<double>());
  EXPECT_EQ(wb.to_vector<double>(), wi.to_vector<double>());
  // The blocked weights are exactly zero.
  const std::vector<double> w = wb.to_vector<double>();  // (N, L, S)
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 3; ++l)
      for (int s = 0; s < 4; ++s) {
        if (kpm.at({n, s}) != 0 || am.at({l, s}) != 0) {
          EXPECT_EQ(w[(n * 3 + l) * 4 + s], 0.0);
        }
      }
}

TEST(BoolDTypeSerialize, NpyAndNpzRoundTrip) {
  const Tensor b = bools({1, 0, 0, 1, 1, 0}, {2, 3});
  const std::string bytes = tg::nn::npy_encode(b);
  EXPECT_NE(bytes.find("'descr': '|b1'"), std::string::npos);
  EXPECT_EQ(bytes.size() % 64, 6u);  // 64-byte aligned header, one byte per element
  const Tensor d = tg::nn::npy_decode(bytes, "test");
  EXPECT_EQ(d.dtype(), DType::b8);
  EXPECT_EQ(d.shape(), b.shape());
  EXPECT_EQ(d.to_vector<bool>(), b.to_vector<bool>());
  // Any nonzero byte reads as true.
  std::string odd = bytes;
  odd[odd.size() - 6] = 7;
  EXPECT_EQ(tg::nn::npy_decode(odd, "test").to_vector<bool>()[0], true);

  const std::string path = (std::filesystem::temp_directory_path() / "tg_bool_roundtrip.npz").string();
  tg::nn::save_npz(path, {{"mask", b}, {"empty", Tensor::zeros({0, 2}, DType::b8)}});
  const auto loaded = tg::nn::load_npz(path);
  std::remove(path.c_str());
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].second.dtype(), DType::b8);
  EXPECT_EQ(loaded[0].second.to_vector<bool>(), b.to_vector<bool>());
  EXPECT_EQ(loaded[1].second.shape(), tg::Shape({0, 2}));
  EXPECT_EQ(loaded[1].second.dtype(), DType::b8);
}
