#pragma once
// Access to tests/data/torch_mha_fixture.npz (made by tests/data/make_mha_fixture.py), shared by
// the attention and transformer tests. Keys are "<case>.<what>"; "<case>.state.<name>" is the
// case's PyTorch state_dict.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../autograd/gradcheck_util.h"  // max_abs_diff
#include "autograd/tensor.h"
#include "nn/module.h"
#include "nn/serialize.h"

namespace tg::nn::testing {

inline const NamedTensors& mha_fixture() {
  static const NamedTensors all = load_npz(TG_TEST_DATA_DIR "/torch_mha_fixture.npz");
  return all;
}

/// The array `key`; throws std::out_of_range if absent.
inline Tensor fixture_get(const std::string& key) {
  for (const auto& [n, t] : mha_fixture())
    if (n == key) return t;
  throw std::out_of_range("torch_mha_fixture.npz has no '" + key + "'");
}

/// The array `key`, or an undefined tensor if absent (optional masks).
inline Tensor fixture_find(const std::string& key) {
  for (const auto& [n, t] : mha_fixture())
    if (n == key) return t;
  return Tensor();
}

/// The state_dict of case `name`, in PyTorch's order.
inline NamedTensors fixture_state(const std::string& name) {
  const std::string p = name + ".state.";
  NamedTensors out;
  for (const auto& [n, t] : mha_fixture())
    if (n.rfind(p, 0) == 0) out.emplace_back(n.substr(p.size()), t);
  return out;
}

/// A 0/1 float mask as tapegrad's i64 mask (undefined stays undefined).
inline Tensor as_i64_mask(const Tensor& m) {
  if (!m.defined()) return m;
  const std::vector<double> v = m.to_vector<double>();
  std::vector<std::int64_t> out(v.begin(), v.end());
  return Tensor::from_vector(out, m.shape());
}

/// max |got - want| (shapes must match; a NaN in only one of them is an infinite error).
inline double fixture_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  return tg::testing::max_abs_diff(got.to_vector<double>(), want.to_vector<double>());
}

}  // namespace tg::nn::testing
