#pragma once
// Helpers shared by the layer tests (test_layers, test_rnn, test_attention, test_torch_fixture).
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "../autograd/gradcheck_util.h"  // rand64, EXPECT_GRADCHECK
#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn::testing {

/// Gradcheck of a module w.r.t. its parameters: tg::gradcheck perturbs private copies of its
/// inputs, so the checked function first makes every parameter handle of `m` alias the
/// corresponding input, xs[first], xs[first + 1], ... in named_parameters() order (same buffer,
/// same autograd state, exactly what Module::to() does to swap a dtype). The module's own forward
/// then runs on the perturbed values and backward accumulates into the inputs' gradients, so the
/// layer code under test is the real one, not a functional copy of it.
inline void bind_parameters(Module& m, const std::vector<Tensor>& xs, std::size_t first) {
  const std::vector<Tensor> params = m.parameters();
  ASSERT_LE(first + params.size(), xs.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].shape() == xs[first + i].shape());
    *params[i].impl() = *xs[first + i].impl();
  }
}

/// The same for the module a holder holds.
template <class M>
void bind_parameters(const ModuleHolder<M>& m, const std::vector<Tensor>& xs, std::size_t first) {
  bind_parameters(*m, xs, first);
}

/// The module's parameters as float64 gradcheck inputs (copies requiring grad).
inline std::vector<Tensor> parameter_inputs(const Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.detach().to(DType::f64).clone().requires_grad_());
  return out;
}
template <class M>
std::vector<Tensor> parameter_inputs(const ModuleHolder<M>& m) {
  return parameter_inputs(*m);
}

/// Several outputs as one flat tensor, so a single gradcheck covers all of them.
inline Tensor flat_concat(const std::vector<Tensor>& ts) {
  std::vector<Tensor> flat;
  for (const Tensor& t : ts) flat.push_back(reshape(t, {t.numel()}));
  return concat(flat, 0);
}

using ::tg::testing::max_abs_diff;  // max |a - b| over all elements (gradcheck_util.h)

/// m.zero_grad(), then loss.backward(): the loss and every parameter's gradient (named_parameters()
/// order), copied, to compare two ways of computing the same loss.
inline std::vector<Tensor> loss_and_parameter_grads(Module& m, const Tensor& loss) {
  m.zero_grad();
  loss.backward();
  std::vector<Tensor> out{loss.detach()};
  for (const auto& [name, p] : m.named_parameters()) out.push_back(p.grad().clone());
  return out;
}
template <class M>
std::vector<Tensor> loss_and_parameter_grads(const ModuleHolder<M>& m, const Tensor& loss) {
  return loss_and_parameter_grads(*m, loss);
}

/// As many tensors in a as in b, each within `tol` of its partner (max_abs_diff < tol).
inline void expect_all_within(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i], b[i]), tol) << "tensor " << i;
}

}  // namespace tg::nn::testing
