#pragma once
// Elementwise kernels (xsimd over contiguous runs, TBB for large tensors). These do no autograd;
// ops call them for both forward and backward. Installed for ops written outside the repository.
#include "autograd/tensor.h"

namespace tg::kernels {

enum class Unary {
  neg, exp, log, sqrt, tanh, sigmoid, relu, square, abs,
  add_scalar,   // x + p
  mul_scalar,   // x * p
  pow_scalar,   // x ^ p
  rsub_scalar,  // p - x
  rdiv_scalar,  // p / x
  sign,         // -1, 0 or 1; 0 for NaN (torch.sign)
  reciprocal,   // 1 / x
  rsqrt,        // 1 / sqrt(x), a true division (not the approximate rsqrt instruction)
  sin, cos, erf, log1p, expm1,
  silu,         // x * sigmoid(x)
  gelu,         // x * Phi(x) = 0.5 x erfc(-x / sqrt(2))
  gelu_tanh,    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  leaky_relu,   // x > 0 ? x : p x
  elu,          // x > 0 ? x : p expm1(x)
  softplus,     // p x > q ? x : log(1 + exp(p x)) / p   (p = beta, q = threshold)
  clamp,        // min(max(x, p), q); NaN where x, p or q is NaN
  // Derivatives dy/dx of the parametrised ops above, as functions of x (same p, q).
  leaky_relu_grad,  // x > 0 ? 1 : p
  elu_grad,         // x <= 0 ? p exp(x) : 1
  softplus_grad,    // p x > q ? 1 : sigmoid(p x)
  clamp_grad,       // p <= x <= q ? 1 : 0 (0 for NaN)
};

enum class Binary {
  add, sub, mul, div, maximum, minimum,
  gt,            // 1 where a > b, else 0
  eq,            // 1 where a == b, else 0
  tanh_grad,     // a * (1 - b^2),  a = dL/dy, b = y = tanh(x)
  sigmoid_grad,  // a * b * (1 - b), b = y = sigmoid(x)
  relu_grad,     // b > 0 ? a : 0,  b = x
  maximum_nan,   // max(a, b), NaN where either is NaN (torch.maximum)
  minimum_nan,   // min(a, b), NaN where either is NaN (torch.minimum)
  max_weight,    // a == b ? 0.5 : a < b ? 0 : 1: the share of dL/dy that maximum(a, b) gives a
  pow,           // std::pow(a, b)
  pow_grad_base,      // b == 0 ? 0 : b a^(b-1)                 (d a^b / da, as PyTorch)
  pow_grad_exponent,  // a == 0 && b >= 0 ? 0 : a^b log(a)      (d a^b / db, as PyTorch)
  erf_grad,       // a 2/sqrt(pi) exp(-b^2),  b = x
  silu_grad,      // a s (1 + b (1 - s)), s = sigmoid(b), b = x
  gelu_grad,      // a (Phi(b) + b phi(b)), b = x
  gelu_tanh_grad, // a d/db gelu_tanh(b), b = x
};

/// y = op(x) (with scalar parameter `param` for the *_scalar ops). Same shape and dtype as x.
Tensor unary(Unary op, const Tensor& x, double param = 0.0);
/// y = op(x) for the ops with two scalar parameters (softplus, clamp and their derivatives).
Tensor unary(Unary op, const Tensor& x, double param, double param2);
/// NumPy-broadcast binary op; `name` is the op named in shape errors.
Tensor binary(Binary op, const Tensor& a, const Tensor& b, const char* name = "binary");
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::add, a, b, "add"); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::mul, a, b, "mul"); }
/// dst += src, same shape and dtype.
void add_inplace(Tensor& dst, const Tensor& src);
/// dst *= s.
void scale_inplace(Tensor& dst, double s);
/// dst, viewed as (outer, size, inner), += src (outer, K, inner) at rows idx[0..K), each in
/// [0, size): every row of dst adds its sources in order of k, so the result does not depend on
/// the thread count (the backward of a gather of rows, and the sparse rows of an embedding).
void scatter_add_rows(Tensor& dst, const Tensor& src, const std::int64_t* idx, std::int64_t K, std::int64_t outer,
                      std::int64_t size, std::int64_t inner);

}  // namespace tg::kernels
