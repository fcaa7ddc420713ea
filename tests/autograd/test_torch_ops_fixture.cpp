// Values and gradients of the everyday ops against PyTorch 1.13, in float64: every case of
// tests/data/torch_ops_fixture.npz (written by tests/data/make_ops_fixture.py, which documents the
// keys) is run here through the public API; outputs, index outputs and the gradients of
// sum(out * r) must match to 1e-12 (absolute, or relative for large values). Every case in the
// file must have an entry in the table below and every entry a case in the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "nn/serialize.h"

using namespace tg;

namespace {

using Ts = std::vector<Tensor>;
/// x: floating inputs (requiring grad), i: integer inputs (i64) -> {values, indices (or undefined)}.
using Op = std::function<std::tuple<Tensor, Tensor>(const Ts& x, const Ts& i)>;

std::tuple<Tensor, Tensor> one(Tensor t) { return {std::move(t), Tensor()}; }

const std::map<std::string, Op>& table() {
  static const std::map<std::string, Op> ops = {
      // elementwise
      {"abs", [](const Ts& x, const Ts&) { return one(abs(x[0])); }},
      {"sign", [](const Ts& x, const Ts&) { return one(sign(x[0])); }},
      {"clamp", [](const Ts& x, const Ts&) { return one(clamp(x[0], -0.5, 0.5)); }},
      {"clamp_min", [](const Ts& x, const Ts&) { return one(clamp(x[0], -0.5)); }},
      {"clamp_max", [](const Ts& x, const Ts&) { return one(clamp(x[0], std::nullopt, 0.5)); }},
      {"minimum", [](const Ts& x, const Ts&) { return one(minimum(x[0], x[1])); }},
      {"maximum", [](const Ts& x, const Ts&) { return one(maximum(x[0], x[1])); }},
      {"sin", [](const Ts& x, const Ts&) { return one(sin(x[0])); }},
      {"cos", [](const Ts& x, const Ts&) { return one(cos(x[0])); }},
      {"erf", [](const Ts& x, const Ts&) { return one(erf(x[0])); }},
      {"gelu", [](const Ts& x, const Ts&) { return one(gelu(x[0])); }},
      {"gelu_tanh", [](const Ts& x, const Ts&) { return one(gelu(x[0], GeluApproximate::tanh)); }},
      {"silu", [](const Ts& x, const Ts&) { return one(silu(x[0])); }},
      {"softplus", [](const Ts& x, const Ts&) { return one(softplus(x[0])); }},
      {"softplus_beta", [](const Ts& x, const Ts&) { return one(softplus(x[0], 2.0, 1.5)); }},
      {"leaky_relu", [](const Ts& x, const Ts&) { return one(leaky_relu(x[0], 0.1)); }},
      {"elu", [](const Ts& x, const Ts&) { return one(elu(x[0], 0.7)); }},
      {"log1p", [](const Ts& x, const Ts&) { return one(log1p(x[0])); }},
      {"expm1", [](const Ts& x, const Ts&) { return one(expm1(x[0])); }},
      {"rsqrt", [](const Ts& x, const Ts&) { return one(rsqrt(x[0])); }},
      {"reciprocal", [](const Ts& x, const Ts&) { return one(reciprocal(x[0])); }},
      {"pow", [](const Ts& x, const Ts&) { return one(pow(x[0], x[1])); }},
      // reductions
      {"var_dim", [](const Ts& x, const Ts&) { return one(var(x[0], {1})); }},
      {"var_biased_keepdim", [](const Ts& x, const Ts&) { return one(var(x[0], {0, 2}, false, true)); }},
      {"var_correction2", [](const Ts& x, const Ts&) { return one(var(x[0], {2}, Correction{2})); }},
      {"var_all", [](const Ts& x, const Ts&) { return one(var(x[0])); }},
      {"std_dim", [](const Ts& x, const Ts&) { return one(tg::std(x[0], {2})); }},
      {"std_correction0", [](const Ts& x, const Ts&) { return one(tg::std(x[0], {0, 1}, Correction{0})); }},
      {"logsumexp", [](const Ts& x, const Ts&) { return one(logsumexp(x[0], {1})); }},
      {"logsumexp_keepdim", [](const Ts& x, const Ts&) { return one(logsumexp(x[0], {0, 2}, true)); }},
      {"amax", [](const Ts& x, const Ts&) { return one(amax(x[0], {0, 2}, true)); }},
      {"amin", [](const Ts& x, const Ts&) { return one(amin(x[0], {1})); }},
      {"max_dim", [](const Ts& x, const Ts&) { return max(x[0], 1); }},
      {"min_dim_keepdim", [](const Ts& x, const Ts&) { return min(x[0], 0, true); }},
      {"max_dim0_3d", [](const Ts& x, const Ts&) { return max(x[0], 0); }},
      {"min_dim1_4d_keepdim", [](const Ts& x, const Ts&) { return min(x[0], 1, true); }},
      {"max_all", [](const Ts& x, const Ts&) { return one(max(x[0])); }},
      {"prod_all", [](const Ts& x, const Ts&) { return one(prod(x[0])); }},
      {"prod_dim", [](const Ts& x, const Ts&) { return one(prod(x[0], 1)); }},
      {"norm2_dim", [](const Ts& x, const Ts&) { return one(norm(x[0], 2.0, {1})); }},
      {"norm3_all", [](const Ts& x, const Ts&) { return one(norm(x[0], 3.0)); }},
      {"norm_inf", [](const Ts& x, const Ts&) { return one(norm(x[0], kInf, {0, 2}, true)); }},
      {"norm1", [](const Ts& x, const Ts&) { return one(norm(x[0], 1.0, {2})); }},
      {"cumsum", [](const Ts& x, const Ts&) { return one(cumsum(x[0], 1)); }},
      {"cumprod", [](const Ts& x, const Ts&) { return one(cumprod(x[0], 0)); }},
      {"cumprod_dim1", [](const Ts& x, const Ts&) { return one(cumprod(x[0], 1)); }},
      {"topk", [](const Ts& x, const Ts&) { return topk(x[0], 2); }},
      {"topk_smallest_dim0", [](const Ts& x, const Ts&) { return topk(x[0], 3, 0, false); }},
      {"sort", [](const Ts& x, const Ts&) { return sort(x[0], 1); }},
      {"sort_descending_dim0", [](const Ts& x, const Ts&) { return sort(x[0], 0, true); }},
      // shape and indexing
      {"gather", [](const Ts& x, const Ts& i) { return one(gather(x[0], 1, i[0])); }},
      {"scatter_add", [](const Ts& x, const Ts& i) { return one(scatter_add(x[0], 0, i[0], x[1])); }},
      {"index_add", [](const Ts& x, const Ts& i) { return one(index_add(x[0], 0, i[0], x[1], 2.0)); }},
      {"repeat", [](const Ts& x, const Ts&) { return one(repeat(x[0], {2, 1, 3})); }},
      {"flip", [](const Ts& x, const Ts&) { return one(flip(x[0], {0, 2})); }},
      {"roll", [](const Ts& x, const Ts&) { return one(roll(x[0], {1, -2}, {0, 1})); }},
      {"roll_flat", [](const Ts& x, const Ts&) { return one(roll(x[0], {3})); }},
      {"tril", [](const Ts& x, const Ts&) { return one(tril(x[0], -1)); }},
      {"triu", [](const Ts& x, const Ts&) { return one(triu(x[0], 1)); }},
      {"pad", [](const Ts& x, const Ts&) { return one(pad(x[0], {1, 2, 0, 1}, 0.5)); }},
      {"pad_crop", [](const Ts& x, const Ts&) { return one(pad(x[0], {-1, 1})); }},
      {"where_bool", [](const Ts& x, const Ts& i) { return one(where(i[0].to(DType::b8), x[0], x[1])); }},
      {"masked_fill_bool", [](const Ts& x, const Ts& i) { return one(masked_fill(x[0], i[0].to(DType::b8), -2.5)); }},
      {"take_along_dim", [](const Ts& x, const Ts& i) { return one(take_along_dim(x[0], i[0], 1)); }},
      // matmul
      {"matmul_dot", [](const Ts& x, const Ts&) { return one(matmul(x[0], x[1])); }},
      {"matmul_mv", [](const Ts& x, const Ts&) { return one(matmul(x[0], x[1])); }},
      {"matmul_vm_batched", [](const Ts& x, const Ts&) { return one(matmul(x[0], x[1])); }},
      {"matmul_bhtd", [](const Ts& x, const Ts&) { return one(matmul(x[0], x[1])); }},
      {"matmul_td_bds", [](const Ts& x, const Ts&) { return one(matmul(x[0], x[1])); }},
      {"matmul_broadcast_batch", [](const Ts& x, const Ts&) { return one(matmul(x[0], x[1])); }},
      {"matmul_transposed", [](const Ts& x, const Ts&) { return one(matmul(x[0], transpose(x[1], -2, -1))); }},
      // comparisons and logic
      {"eq", [](const Ts& x, const Ts&) { return one(eq(x[0], x[1])); }},
      {"ne", [](const Ts& x, const Ts&) { return one(ne(x[0], x[1])); }},
      {"lt", [](const Ts& x, const Ts&) { return one(lt(x[0], x[1])); }},
      {"le", [](const Ts& x, const Ts&) { return one(le(x[0], x[1])); }},
      {"gt", [](const Ts& x, const Ts&) { return one(gt(x[0], x[1])); }},
      {"ge", [](const Ts& x, const Ts&) { return one(ge(x[0], x[1])); }},
      {"eq_scalar", [](const Ts& x, const Ts&) { return one(x[0] == 2.0); }},
      {"ne_scalar", [](const Ts& x, const Ts&) { return one(x[0] != 2.0); }},
      {"lt_scalar", [](const Ts& x, const Ts&) { return one(x[0] < 2.0); }},
      {"le_scalar", [](const Ts& x, const Ts&) { return one(x[0] <= 2.0); }},
      {"gt_scalar", [](const Ts& x, const Ts&) { return one(x[0] > 2.0); }},
      {"ge_scalar", [](const Ts& x, const Ts&) { return one(x[0] >= 2.0); }},
      {"logical_and", [](const Ts& x, const Ts&) { return one(logical_and(x[0], x[1])); }},
      {"logical_or", [](const Ts& x, const Ts&) { return one(logical_or(x[0], x[1])); }},
      {"logical_xor", [](const Ts& x, const Ts&) { return one(logical_xor(x[0], x[1])); }},
      {"logical_not", [](const Ts& x, const Ts&) { return one(logical_not(x[0])); }},
      {"isnan", [](const Ts& x, const Ts&) { return one(isnan(x[0])); }},
      {"isinf", [](const Ts& x, const Ts&) { return one(isinf(x[0])); }},
      {"isfinite", [](const Ts& x, const Ts&) { return one(isfinite(x[0])); }},
      {"any_dim", [](const Ts& x, const Ts&) { return one(any(x[0], 1)); }},
      {"all_dim", [](const Ts& x, const Ts&) { return one(all(x[0], 1)); }},
      {"count_nonzero", [](const Ts& x, const Ts&) { return one(count_nonzero(x[0], {0})); }},
      {"nonzero", [](const Ts& x, const Ts&) { return one(nonzero(x[0])); }},
      // edge cases
      {"edge_abs_zero", [](const Ts& x, const Ts&) { return one(abs(x[0])); }},
      {"edge_clamp_at_bounds", [](const Ts& x, const Ts&) { return one(clamp(x[0], -0.5, 0.5)); }},
      {"edge_clamp_crossed", [](const Ts& x, const Ts&) { return one(clamp(x[0], 0.5, -0.5)); }},
      {"edge_maximum_ties", [](const Ts& x, const Ts&) { return one(maximum(x[0], x[1])); }},
      {"edge_minimum_ties", [](const Ts& x, const Ts&) { return one(minimum(x[0], x[1])); }},
      {"edge_leaky_relu_zero", [](const Ts& x, const Ts&) { return one(leaky_relu(x[0], 0.2)); }},
      {"edge_elu_zero", [](const Ts& x, const Ts&) { return one(elu(x[0], 0.5)); }},
      {"edge_softplus_threshold", [](const Ts& x, const Ts&) { return one(softplus(x[0], 1.0, 2.0)); }},
      {"edge_pow_zero_base", [](const Ts& x, const Ts&) { return one(pow(x[0], x[1])); }},
      {"edge_prod_one_zero", [](const Ts& x, const Ts&) { return one(prod(x[0], 1)); }},
      {"edge_prod_two_zeros", [](const Ts& x, const Ts&) { return one(prod(x[0])); }},
      {"edge_cumprod_zeros", [](const Ts& x, const Ts&) { return one(cumprod(x[0], 0)); }},
      {"edge_amax_ties", [](const Ts& x, const Ts&) { return one(amax(x[0], {1})); }},
      {"edge_max_all_ties", [](const Ts& x, const Ts&) { return one(max(x[0])); }},
      {"edge_norm_zero", [](const Ts& x, const Ts&) { return one(norm(x[0], 2.0, {1})); }},
      {"edge_std_constant", [](const Ts& x, const Ts&) { return one(tg::std(x[0], {1})); }},
      {"edge_var_single", [](const Ts& x, const Ts&) { return one(var(x[0], {1}, Correction{0})); }},
      {"edge_sign_zero", [](const Ts& x, const Ts&) { return one(sign(x[0])); }},
      {"edge_sign_nan", [](const Ts& x, const Ts&) { return one(sign(x[0])); }},
      {"edge_abs_nan", [](const Ts& x, const Ts&) { return one(abs(x[0])); }},
      {"edge_clamp_nan", [](const Ts& x, const Ts&) { return one(clamp(x[0], -1.0, 1.0)); }},
      {"edge_maximum_nan", [](const Ts& x, const Ts&) { return one(maximum(x[0], x[1])); }},
      {"edge_minimum_nan", [](const Ts& x, const Ts&) { return one(minimum(x[0], x[1])); }},
      {"edge_pow_negative_base", [](const Ts& x, const Ts&) { return one(pow(x[0], x[1])); }},
      {"edge_reciprocal_zero", [](const Ts& x, const Ts&) { return one(reciprocal(x[0])); }},
      {"edge_log1p_minus1", [](const Ts& x, const Ts&) { return one(log1p(x[0])); }},
      {"edge_rsqrt_zero_inf", [](const Ts& x, const Ts&) { return one(rsqrt(x[0])); }},
      {"edge_max_dim_nan", [](const Ts& x, const Ts&) { return max(x[0], 1); }},
      {"edge_sort_nan", [](const Ts& x, const Ts&) { return sort(x[0], 0); }},
      {"edge_logsumexp_inf", [](const Ts& x, const Ts&) { return one(logsumexp(x[0], {1})); }},
      {"edge_softplus_large", [](const Ts& x, const Ts&) { return one(softplus(x[0])); }},
      {"edge_gelu_tails", [](const Ts& x, const Ts&) { return one(gelu(x[0])); }},
  };
  return ops;
}

using Fixture = std::map<std::string, Tensor>;

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    for (auto& [k, t] : nn::load_npz(TG_TEST_DATA_DIR "/torch_ops_fixture.npz")) out[k] = t;
    return out;
  }();
  return f;
}

bool has(const std::string& key) { return fixture().count(key) != 0; }
const Tensor& at(const std::string& key) { return fixture().at(key); }

/// Worst |got - want| / max(1, |want|) (NaN and inf must match exactly); shapes must agree.
double worst_error(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (!(got.shape() == want.shape())) return INFINITY;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isinf(w[i])) {
      const bool same = std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i];
      if (!same) return INFINITY;
      continue;
    }
    const double e = std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;  // a NaN where PyTorch has a number fails
  }
  return worst;
}

std::vector<std::string> fixture_cases() {
  std::set<std::string> names;
  for (const auto& [k, _] : fixture()) names.insert(k.substr(0, k.find('.')));
  return {names.begin(), names.end()};
}

}  // namespace

TEST(TorchOpsFixture, EveryCaseHasAnOpAndEveryOpACase) {
  const std::vector<std::string> cases = fixture_cases();
  EXPECT_GE(cases.size(), 80u);
  for (const auto& c : cases) EXPECT_TRUE(table().count(c)) << "no op in the table for fixture case " << c;
  for (const auto& [name, _] : table()) EXPECT_TRUE(has(name + ".out")) << "no fixture case for " << name;
}

TEST(TorchOpsFixture, ValuesAndGradientsMatchPyTorch) {
  constexpr double kTol = 1e-12;
  int compared = 0;
  for (const auto& name : fixture_cases()) {
    if (!table().count(name)) continue;  // reported by the test above
    SCOPED_TRACE(name);
    const bool differentiable = has(name + ".r");
    Ts x, idx;
    for (int k = 0; has(name + ".x" + std::to_string(k)); ++k) {
      Tensor t = at(name + ".x" + std::to_string(k)).clone().detach();
      if (differentiable) t.requires_grad_();
      x.push_back(t);
    }
    for (int k = 0; has(name + ".i" + std::to_string(k)); ++k) idx.push_back(at(name + ".i" + std::to_string(k)).to(DType::i64));
    const auto [out, indices] = table().at(name)(x, idx);
    const Tensor& want = at(name + ".out");
    if (differentiable) {
      EXPECT_EQ(out.dtype(), DType::f64);
    } else {  // comparisons: bool results (count_nonzero: int64), no gradient
      EXPECT_EQ(out.dtype(), name == "count_nonzero" || name == "nonzero" ? DType::i64 : DType::b8);
      EXPECT_FALSE(out.requires_grad());
    }
    EXPECT_LE(worst_error(out, want, name), kTol) << name << " output";
    if (has(name + ".indices")) {
      ASSERT_TRUE(indices.defined()) << name;
      EXPECT_EQ(indices.dtype(), DType::i64);
      EXPECT_EQ(worst_error(indices, at(name + ".indices"), name), 0.0) << name << " indices";
    }
    ++compared;
    if (!differentiable) continue;
    sum(out * at(name + ".r")).backward();
    for (std::size_t k = 0; k < x.size(); ++k) {
      const Tensor& gw = at(name + ".g" + std::to_string(k));
      const Tensor g = x[k].grad().defined() ? x[k].grad() : Tensor::zeros(x[k].shape(), DType::f64);
      EXPECT_LE(worst_error(g, gw, name), kTol) << name << " gradient of input " << k;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(table().size()));
}
